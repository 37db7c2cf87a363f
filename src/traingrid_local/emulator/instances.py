"""Adaptation (moto 5.2.5): EC2's instance types as AWS Batch sees them: how much memory a
node registers, its vCPUs, whether a job's memory fits, and the p3 sizes of the reference
workload.

moto's EC2 instance catalog (a snapshot of one region's offerings) lacks the p3.2xlarge,
p3.8xlarge and p3.16xlarge sizes; they are added, sized from the p3dn.24xlarge entry, so
compute environments that allow them can be created.
"""

from __future__ import annotations

import json

from moto.ec2.models.instance_types import INSTANCE_TYPES

from traingrid.vocabulary.catalog import ECS_AGENT_RESERVED_MIB
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
