"""Where the two Batch backends of a TrainingRun differ, in one place: the shape of a node.

A stack trains either on its own ECS-backed compute environment (``ecs``, the default) or on
a compute environment of type EKS on the user's cluster (``eks``: the template's
``EksClusterName``, which also sets the functions' ``TRAINING_BACKEND``). The plan, attempts,
waits, archive and cleanup are the same; only what SubmitJob overrides per node differs:

- ``ecs``: ``containerOverrides`` (instance type, ``resourceRequirements`` GPU/VCPU/MEMORY,
  the command after the image's entrypoint);
- ``eks``: the node's instance type on the node override (``instanceTypes``), and the pod's
  container (``eksPropertiesOverride``): Kubernetes ``limits``/``requests`` (``cpu``,
  ``memory`` and GPUs through the NVIDIA device plugin: the resources Batch documents for an
  EKS container; the privileged container sees the host's EFA devices, as on ECS), the
  command as ``args`` (a pod's ``command`` would replace the image's entrypoint, the node
  program), and sshd on a port of its own (the pod shares the host's network and port 22).

The state machine picks its SubmitJob state by the plan's ``job.backend``; the template
registers the matching job definition (``TrainingJobDefinition`` or
``TrainingEksJobDefinition``, sized as ``pod_resources`` sizes its instance type). A run's
launcher, unset, is the backend's default. Pure: no AWS calls.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypedDict

from traingrid.vocabulary.catalog import InstanceType, job_memory_mib


class Backend(StrEnum):
    """The Batch backend a stack trains on (its functions' ``TRAINING_BACKEND``)."""

    ECS = "ecs"
    EKS = "eks"


DEFAULT_BACKEND = Backend.ECS

# The one container of a node's pod (the job definition's and the overrides' name for it).
NODE_CONTAINER = "node"
# The resources Batch takes for an EKS container. Batch API, EksContainerResourceRequirements:
# "The supported resources include memory, cpu, and nvidia.com/gpu" (the NVIDIA device
# plugin's). Not the EFA device plugin's vpc.amazonaws.com/efa: the node's container is
# privileged (it mounts Lustre), so it sees the host's EFA devices (/dev/infiniband) as the
# ECS job's privileged container does, and Batch gives it the whole node (one pod a node).
GPU_RESOURCE = "nvidia.com/gpu"
BATCH_EKS_RESOURCES = ("cpu", "memory", GPU_RESOURCE)
# The pod is on the host's network (hostNetwork: the nodes meet on their hosts' addresses):
# the node program's sshd, which mpirun's ssh reaches (traingrid_node's TRAINGRID_SSH_PORT:
# sshd's Port and the job's ssh client configuration), listens on a port of its own, never
# the host's sshd's 22. Inside the training security group, which lets its members reach
# each other on every port.
EKS_SSH_PORT = 2222
SSH_PORTS = {Backend.ECS: 22, Backend.EKS: EKS_SSH_PORT}  # ECS: the task's own network
# On a Kubernetes node, the kubelet's reserve and the daemon sets (device plugins, the FSx CSI
# node or Lustre client, the CNI, kube-proxy, a log agent) take what ECS's agent does not: a
# pod that asks for more than the node's allocatable is never scheduled, and the job waits in
# RUNNABLE. One vCPU and 8 GiB less than the ECS job asks leaves them room on every type of
# the catalog (EKS's AMIs reserve 255 MiB + 11 MiB a pod and < 0.2 vCPU on these sizes).
EKS_RESERVED_VCPUS = 1
EKS_RESERVED_MIB = 8 * 1024
# Elastic torchrun by default on EKS: nodes may leave and rejoin the rendezvous the main
# node's program hosts (``--nnodes=MIN:N``); a request may still ask for mpirun.
EKS_DEFAULT_LAUNCHER = "torchrun"
# On ECS the default depends on the run: elastic torchrun where it may shrink (min_nodes below
# nodes), so a lost worker node costs a restart of the ranks inside the same Batch job (the
# job ends only when its main node exits; "Child node failure doesn't cause more attempts"),
# not a new attempt; mpirun cannot shrink. Where the run may not shrink a lost node ends the
# job with either launcher, and mpirun stays: it passes on each rank's own exit status and the
# request's extra_mpi_params.
ECS_DEFAULT_LAUNCHER = "mpirun"
ECS_ELASTIC_LAUNCHER = "torchrun"


# Keys as Step Functions' aws-sdk integration takes a structure (PascalCase), as the ECS
# shape's ResourceRequirements {Type, Value}.
class PodResources(TypedDict):
    Limits: dict[str, str]
    Requests: dict[str, str]


class PodShape(TypedDict):
    """What the plan decides of an EKS node: its instance type and its container's
    resources (``job.pod``; the state machine's EKS SubmitJob state reads them)."""

    container: str
    instance_types: list[str]
    resources: PodResources


def backend_of(value: str | None) -> Backend:
    """The backend a stack's ``TRAINING_BACKEND`` names (unset or empty: ``ecs``)."""
    try:
        return Backend((value or DEFAULT_BACKEND).strip().lower())
    except ValueError:
        raise ValueError(f"TRAINING_BACKEND must be one of {', '.join(Backend)}, "
                         f"not {value!r}") from None


def pod_memory_mib(instance: InstanceType) -> int:
    return job_memory_mib(instance) - EKS_RESERVED_MIB


def pod_resources(instance: InstanceType) -> PodResources:
    """A node's pod asks for the whole instance but the node's own reserve, as Kubernetes
    quantities; requests equal limits (Batch requires it of memory and GPUs, and a pod
    whose requests equal its limits is never evicted first)."""
    limits = {
        "cpu": str(instance.vcpus - EKS_RESERVED_VCPUS),
        "memory": f"{pod_memory_mib(instance)}Mi",
        GPU_RESOURCE: str(instance.gpus),
    }
    return {"Limits": limits, "Requests": dict(limits)}


def backend_environment(backend: Backend) -> dict[str, str]:
    """What a node's environment says of its backend: the port of the node program's sshd
    (on EKS's host network, not the host's 22)."""
    return {"TRAINGRID_SSH_PORT": str(SSH_PORTS[backend])}


def pod_shape(instance: InstanceType) -> PodShape:
    return {"container": NODE_CONTAINER, "instance_types": [instance.name],
            "resources": pod_resources(instance)}


def launcher_for(backend: Backend, requested: str | None, *, nodes: int = 1,
                 min_nodes: int | None = None, mpi_options: bool = False) -> str:
    """The launcher a run uses: what the request says, or by default elastic torchrun on EKS;
    on ECS elastic torchrun when the run may shrink (``min_nodes`` below ``nodes``) and asks
    nothing of mpirun (``mpi_options``: the request set its own ``extra_mpi_params``), else
    mpirun."""
    if requested is not None:
        return requested
    if backend is Backend.EKS:
        return EKS_DEFAULT_LAUNCHER
    may_shrink = min_nodes is not None and min_nodes < nodes
    return ECS_ELASTIC_LAUNCHER if may_shrink and not mpi_options else ECS_DEFAULT_LAUNCHER


def last_attempt_container(description: dict[str, Any]) -> dict[str, Any]:
    """The main node's container of a job's last attempt as DescribeJobs shows it: an ECS
    job's ``attempts[].container``, an EKS job's ``eksAttempts[].containers[0]`` (its pod's
    one container; exit code and reason have the same names)."""
    if attempts := description.get("attempts") or []:
        return dict(attempts[-1].get("container") or {})
    if pods := description.get("eksAttempts") or []:
        return dict((pods[-1].get("containers") or [{}])[0])
    return {}
