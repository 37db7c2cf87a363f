"""Adaptation (moto 5.2.5): multi-node jobs of AWS Batch on Amazon EKS (a job definition whose
node ranges carry ``eksProperties``), run by :mod:`.batch`'s simulation as ECS ones are.

moto registers such a definition but reads nothing of it when a job is submitted. Here the
simulation reads what the node's pod would run: the environment (the job definition's
container ``env``, then each node override's ``eksPropertiesOverride`` container ``env``),
the command (the container's ``args``, after the image's entrypoint), the instance type (the
node range's or the override's ``instanceTypes``), the memory the pod asks for (its
``memory`` limit, in Mi) and ``/dev/shm`` (a memory-backed ``emptyDir`` mounted there: its
``sizeLimit``; none: the container runtime's 64 MiB, as Docker's). As Batch does, a submission
that overrides an EKS job's nodes with ``containerOverrides``, or an ECS job's with
``eksPropertiesOverride``, is refused (ClientException), and so is a container (of a job
definition or an override) that asks for a resource other than those Batch documents for EKS
containers (``memory``, ``cpu``, ``nvidia.com/gpu``: :data:`BATCH_EKS_RESOURCES`).
DescribeJobs shows an EKS job's attempts as Batch does for pods: ``eksAttempts`` (each with
its containers' exit codes and reasons, the pod and node names) and ``eksProperties``, not
``container``/``attempts``. A compute environment of type EKS (CloudFormation's
``EksConfiguration``) needs its cluster to exist in the account, and is described with its
``eksConfiguration``.
"""

from __future__ import annotations

import re
from typing import Any

from moto.batch.exceptions import ClientException
from moto.batch.models import BatchBackend, ComputeEnvironment, Job, JobDefinition
from moto.batch.responses import BatchResponse

from traingrid.training.job_shape import BATCH_EKS_RESOURCES
from traingrid_local.emulator.patching import PATCHES

_MEBIBYTES = re.compile(r"^(\d+)Mi$")
_GIBIBYTES = re.compile(r"^(\d+)Gi$")
SHM_PATH = "/dev/shm"


def _ranges(definition: JobDefinition) -> list[dict[str, Any]]:
    return list((definition.node_properties or {}).get("nodeRangeProperties", []))


def is_eks(definition: JobDefinition) -> bool:
    return any("eksProperties" in r for r in _ranges(definition))


def _pods(definition: JobDefinition) -> list[dict[str, Any]]:
    return [r["eksProperties"].get("podProperties", {}) for r in _ranges(definition)
            if "eksProperties" in r]


def _containers(definition: JobDefinition) -> list[dict[str, Any]]:
    return [c for pod in _pods(definition) for c in pod.get("containers", [])]


def _override_containers(overrides: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for o in overrides.get("nodePropertyOverrides", [])
            for c in (o.get("eksPropertiesOverride", {}).get("podProperties", {})
                      .get("containers", []))]


def environment(definition: JobDefinition, overrides: dict[str, Any]) -> dict[str, str]:
    env = {e["name"]: e.get("value", "") for c in _containers(definition)
           for e in c.get("env", [])}
    for container in _override_containers(overrides):
        env.update({e["name"]: e.get("value", "") for e in container.get("env", [])})
    return env


def mebibytes(quantity: str | None) -> int | None:
    """A Kubernetes quantity in MiB, for the forms a job shape uses (``<n>Mi``, ``<n>Gi``)."""
    if quantity is None:
        return None
    if found := _MEBIBYTES.match(quantity):
        return int(found.group(1))
    if found := _GIBIBYTES.match(quantity):
        return int(found.group(1)) * 1024
    raise ClientException(f"memory quantity {quantity!r}: use whole Mi (as Batch requires)")


def _shared_memory_mib(definition: JobDefinition) -> int | None:
    for pod in _pods(definition):
        mounted = {m.get("name") for c in pod.get("containers", [])
                   for m in c.get("volumeMounts", []) if m.get("mountPath") == SHM_PATH}
        for volume in pod.get("volumes", []):
            empty = volume.get("emptyDir")
            if volume.get("name") in mounted and empty and empty.get("medium") == "Memory":
                return mebibytes(empty.get("sizeLimit"))
    return None


def value(definition: JobDefinition, overrides: dict[str, Any], name: str) -> Any:
    """What :mod:`.batch` asks of an ECS container (``instanceType``, ``resourceRequirements``,
    ``command``, ``linuxParameters``), read from the pod."""
    if name == "instanceType":
        for override in overrides.get("nodePropertyOverrides", []):
            if override.get("instanceTypes"):
                return override["instanceTypes"][0]
        return next((r["instanceTypes"][0] for r in _ranges(definition)
                     if r.get("instanceTypes")), None)
    containers = [*_override_containers(overrides), *_containers(definition)]
    if name == "command":
        return next((c["args"] for c in containers if c.get("args") is not None), None)
    if name == "resourceRequirements":
        memory = next((c["resources"]["limits"]["memory"] for c in containers
                       if c.get("resources", {}).get("limits", {}).get("memory")), None)
        mib = mebibytes(memory)
        return None if mib is None else [{"type": "MEMORY", "value": str(mib)}]
    if name == "linuxParameters":
        shm = _shared_memory_mib(definition)
        return None if shm is None else {"sharedMemorySize": shm}
    return None


# --- Batch's refusals and descriptions ------------------------------------------------------

def resource_problems(containers: list[dict[str, Any]]) -> list[str]:
    """Resources an EKS container asks for that Batch does not take. Batch API,
    EksContainerResourceRequirements: "The supported resources include memory, cpu, and
    nvidia.com/gpu"."""
    return [f"container {c.get('name', '?')}: resource {name!r} in {kind} is not supported "
            f"for Amazon EKS resources; supported: {', '.join(BATCH_EKS_RESOURCES)}"
            for c in containers for kind, asked in (c.get("resources") or {}).items()
            for name in asked or {} if name not in BATCH_EKS_RESOURCES]


def _refuse_unsupported_resources(previous: Any) -> Any:
    def register(self: BatchBackend, *args: Any, **kwargs: Any) -> Any:
        ranges = (kwargs.get("node_properties") or {}).get("nodeRangeProperties", [])
        containers = [c for r in ranges
                      for c in r.get("eksProperties", {}).get("podProperties", {})
                      .get("containers", [])]
        if problems := resource_problems(containers):
            raise ClientException("; ".join(problems))
        return previous(self, *args, **kwargs)

    return register


def _refuse_mixed_overrides(previous: Any) -> Any:
    def submitjob(self: BatchResponse) -> str:
        name = self._get_param("jobDefinition")
        definition = self.batch_backend.get_job_definition(name)
        node_overrides = self._get_param("nodeOverrides") or {}
        overrides = node_overrides.get("nodePropertyOverrides", [])
        if problems := resource_problems(_override_containers(node_overrides)):
            raise ClientException("; ".join(problems))
        if definition is not None and definition.node_properties is not None:
            eks = is_eks(definition)
            for override in overrides:
                if eks and "containerOverrides" in override:
                    raise ClientException("containerOverrides can't be used with a job "
                                          "definition for Amazon EKS resources; use "
                                          "eksPropertiesOverride")
                if not eks and "eksPropertiesOverride" in override:
                    raise ClientException("eksPropertiesOverride can only be used with a job "
                                          "definition for Amazon EKS resources")
        return str(previous(self))

    return submitjob


def as_pod_attempts(job: Job, described: dict[str, Any]) -> dict[str, Any]:
    """An EKS job as DescribeJobs shows it: its attempts as pods (``eksAttempts``)."""
    out = dict(described)
    container = out.pop("container", None) or {}
    attempts = out.pop("attempts", None) or []
    out["attempts"] = []
    pods = _pods(job.job_definition)
    out["eksProperties"] = {"podProperties": dict(pods[0]) if pods else {}}
    eks_attempts = []
    for number, attempt in enumerate(attempts):
        state = dict(attempt.get("container") or container)
        state.pop("logStreamName", None)
        eks_attempts.append({
            "containers": [{"name": c.get("name", "node"), **state}
                           for c in (pods[0].get("containers", [{}]) if pods else [{}])],
            "podName": f"aws-batch.{job.job_id}-{number}",
            "nodeName": f"ip-10-20-0-{10 + number}.ec2.internal",
            **{k: v for k, v in attempt.items() if k in ("startedAt", "stoppedAt",
                                                         "statusReason")},
        })
    out["eksAttempts"] = eks_attempts
    return out


def _describe(previous: Any) -> Any:
    def describe(self: Job) -> dict[str, Any]:
        described: dict[str, Any] = previous(self)
        if "simulated" in self.__dict__ and is_eks(self.job_definition):
            return as_pod_attempts(self, described)
        return described

    return describe


# --- compute environments of type EKS ------------------------------------------------------

def attach_eks_configuration(environment: ComputeEnvironment, configuration: dict[str, Any],
                             account_id: str, region_name: str) -> None:
    """Give a compute environment its ``eksConfiguration``; as Batch does, refuse one whose
    cluster is not in the account and region (the user's cluster must exist first)."""
    from moto.eks.models import eks_backends

    name = configuration["eksClusterArn"].rsplit("/", 1)[-1]
    if name not in eks_backends[account_id][region_name].clusters:
        raise ClientException(f"EKS cluster {configuration['eksClusterArn']} not found: "
                              "create the cluster before the compute environment")
    environment.__dict__["eks_configuration"] = dict(configuration)


def _describe_compute_environments(previous: Any) -> Any:
    def describe(self: BatchBackend, environments: list[str] | None = None
                 ) -> list[dict[str, Any]]:
        described: list[dict[str, Any]] = previous(self, environments)
        for entry in described:
            environment = self._compute_environments.get(entry["computeEnvironmentArn"])
            eks = environment.__dict__.get("eks_configuration") if environment else None
            if eks:
                entry.pop("ecsClusterArn", None)
                entry.update(eksConfiguration=eks, containerOrchestrationType="EKS")
        return described

    return describe


def apply() -> None:
    PATCHES.wrap(BatchResponse, "submitjob", _refuse_mixed_overrides)
    PATCHES.wrap(BatchBackend, "register_job_definition", _refuse_unsupported_resources)
    PATCHES.wrap(Job, "describe", _describe)
    PATCHES.wrap(BatchBackend, "describe_compute_environments", _describe_compute_environments)
