"""Adaptation (moto 5.2.5): EC2's instance types as AWS Batch sees them: how much memory a
node registers, its vCPUs, whether a job's memory fits, which types Batch's AMI can launch,
and the p3 sizes of the seeds' reference workload.

moto's EC2 instance catalog (a snapshot of one region's offerings) lacks the p3.2xlarge,
p3.8xlarge and p3.16xlarge sizes; they are added, sized from the p3dn.24xlarge entry, so
compute environments that allow them can be created, on an AMI of their own: moto accepts any
instance type with any image, but Batch's ECS_AL2023_NVIDIA "doesn't support p3 and g3 instance
types", so a compute environment that would launch one on it is refused here
(:func:`ami_problem`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from moto.batch.exceptions import ClientException
from moto.batch.models import BatchBackend
from moto.ec2.models import ec2_backends
from moto.ec2.models.instance_types import INSTANCE_TYPES

from traingrid.vocabulary.catalog import ECS_AGENT_RESERVED_MIB, needs_own_ami
from traingrid_local.emulator.patching import PATCHES

# Batch registers less memory than a node has installed: AWS's documented m4.large registers
# 7,985 of 8,192 MiB, and its AMI keeps ECS_AGENT_RESERVED_MIB more for the ECS agent.
REGISTERED_MEMORY_SHARE = 7985 / 8192


def registered_memory_mib(instance_type: str) -> int | None:
    installed = INSTANCE_TYPES.get(instance_type, {}).get("MemoryInfo", {}).get("SizeInMiB")
    if installed is None:
        return None
    return int(installed * REGISTERED_MEMORY_SHARE) - ECS_AGENT_RESERVED_MIB


def instance_vcpus(instance_type: str | None) -> int:
    """A node's vCPUs, as EC2 counts them against the account's limit."""
    info = INSTANCE_TYPES.get(instance_type or "", {}).get("VCpuInfo", {})
    return int(info.get("DefaultVCpus", 0))


def fits_a_node(instance_type: str | None, requirements: list[dict[str, str]] | None) -> bool:
    """Whether a node of this type can take the job's memory; one that cannot is never
    placed, and the job waits in RUNNABLE."""
    registered = registered_memory_mib(instance_type) if instance_type else None
    memory = next((int(r["value"]) for r in requirements or () if r["type"] == "MEMORY"), 0)
    return registered is None or memory <= registered


# size → (vCPUs, GPUs, memory MiB)
P3_SIZES = {"p3.2xlarge": (8, 1, 62464), "p3.8xlarge": (32, 4, 249856),
            "p3.16xlarge": (64, 8, 499712)}


def add_p3_instance_types() -> None:
    template = INSTANCE_TYPES["p3dn.24xlarge"]
    added = {}
    for name, (vcpus, gpus, memory) in P3_SIZES.items():
        if name not in INSTANCE_TYPES:
            entry = json.loads(json.dumps(template))
            entry.update(InstanceType=name, MemoryInfo={"SizeInMiB": memory},
                         InstanceStorageSupported=False)
            entry.pop("InstanceStorageInfo", None)
            entry["VCpuInfo"] = dict(entry.get("VCpuInfo", {}), DefaultVCpus=vcpus)
            entry["GpuInfo"]["Gpus"][0].update(Count=gpus, MemoryInfo={"SizeInMiB": 16384})
            added[name] = entry
    PATCHES.update(INSTANCE_TYPES, added, "moto's EC2 instance types (p3)")


# AWS Batch API Reference, Ec2Configuration: "If Ec2Configuration isn't specified, the default
# is ECS_AL2023"; imageType ECS_AL2023_NVIDIA: "Default for all GPU instance families ...
# ECS_AL2023_NVIDIA doesn't support p3 and g3 instance types." imageIdOverride: "The AMI ID
# used for instances launched in the compute environment that match the image type. This
# setting overrides the imageId set in the computeResource object." An AMI of one's own (the
# override, the deprecated computeResources.imageId, or the launch template's ImageId) is
# launched as it is: Batch no longer chooses one.
AL2023_IMAGE_TYPES = ("ECS_AL2023", "ECS_AL2023_NVIDIA")
DEFAULT_GPU_IMAGE_TYPE = "ECS_AL2023_NVIDIA"


def _launch_template_image(account_id: str, region: str, reference: dict[str, Any]) -> str | None:
    template_id = reference.get("launchTemplateId")
    backend = ec2_backends[account_id][region]
    if not template_id and reference.get("launchTemplateName"):
        template = backend.get_launch_template_by_name(reference["launchTemplateName"])
    elif template_id:
        template = backend.get_launch_template(template_id)
    else:
        return None
    image: str | None = template.latest_version().data.get("ImageId")
    return image


def ami_problem(compute_resources: dict[str, Any], account_id: str, region: str) -> str | None:
    """Why Batch would refuse a compute environment of ``compute_resources`` (lower-camel
    keys, as the API takes them): p3 or g3 types (or families) launched on the
    ECS_AL2023_NVIDIA AMI Batch chooses for them when no AMI is named; None when it launches.
    """
    unsupported = [t for t in compute_resources.get("instanceTypes") or () if needs_own_ami(t)]
    if not unsupported or compute_resources.get("imageId"):
        return None
    if _launch_template_image(account_id, region, compute_resources.get("launchTemplate") or {}):
        return None
    entries = compute_resources.get("ec2Configuration") or []
    # GPU types take the entry of a GPU image type, else the only one there is.
    entry = next((e for e in entries if str(e.get("imageType", "")).endswith("_NVIDIA")),
                 entries[0] if entries else {})
    image_type = entry.get("imageType", DEFAULT_GPU_IMAGE_TYPE)
    if entry.get("imageIdOverride") or image_type not in AL2023_IMAGE_TYPES:
        return None
    return (f"Error executing request, Exception : {image_type} doesn't support p3 and g3 "
            f"instance types ({', '.join(unsupported)}): name an AMI that supports them in "
            f"ec2Configuration imageIdOverride, or launch other instance types.")


def _refuse_on_create(previous: Callable[..., None]) -> Callable[..., None]:
    def validate_compute_resources(self: BatchBackend, cr: dict[str, Any]) -> None:
        previous(self, cr)
        problem = ami_problem(cr, self.account_id, self.region_name)
        if problem:
            raise ClientException(problem)

    return validate_compute_resources


def _refuse_on_update(previous: Callable[..., Any]) -> Callable[..., Any]:
    def update_compute_environment(self: BatchBackend, compute_environment_name: str,
                                   state: str | None, compute_resources: Any | None,
                                   service_role: str | None) -> Any:
        environment = self.get_compute_environment(compute_environment_name)
        if environment is not None and compute_resources:
            # An update keeps what it does not name.
            merged = {**(environment.compute_resources or {}), **compute_resources}
            problem = ami_problem(merged, self.account_id, self.region_name)
            if problem:
                raise ClientException(problem)
        return previous(self, compute_environment_name, state, compute_resources, service_role)

    return update_compute_environment


def refuse_types_the_ami_lacks() -> None:
    """Batch refuses compute environments whose AMI cannot launch their types."""
    PATCHES.wrap(BatchBackend, "_validate_compute_resources", _refuse_on_create)
    PATCHES.wrap(BatchBackend, "update_compute_environment", _refuse_on_update)


def apply() -> None:
    add_p3_instance_types()
    refuse_types_the_ami_lacks()
