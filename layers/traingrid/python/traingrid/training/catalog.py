"""What TrainGrid knows about instance types and FSx for Lustre, in one place.

Prices are public on-demand list prices in us-east-1 (USD), used for estimates only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class InstanceType:
    name: str
    gpus: int
    vcpus: int
    memory_mib: int
    usd_per_hour: float


INSTANCE_TYPES: dict[str, InstanceType] = {
    it.name: it
    for it in (
        InstanceType("p3.2xlarge", 1, 8, 61 * 1024, 3.06),
        InstanceType("p3.8xlarge", 4, 32, 244 * 1024, 12.24),
        InstanceType("p3.16xlarge", 8, 64, 488 * 1024, 24.48),
        InstanceType("p3dn.24xlarge", 8, 96, 768 * 1024, 31.212),
        InstanceType("p4d.24xlarge", 8, 96, 1152 * 1024, 32.7726),
        InstanceType("p5.48xlarge", 8, 192, 2048 * 1024, 55.04),
        InstanceType("g5.12xlarge", 4, 48, 192 * 1024, 5.672),
        InstanceType("g5.48xlarge", 8, 192, 768 * 1024, 16.288),
    )
}

# Memory the ECS agent and OS keep for themselves on each node.
NODE_MEMORY_RESERVE_MIB = 8 * 1024


class DeploymentType(StrEnum):
    """FSx for Lustre deployment types that can be hydrated from S3 with ImportPath."""

    SCRATCH_1 = "SCRATCH_1"
    SCRATCH_2 = "SCRATCH_2"
    PERSISTENT_1 = "PERSISTENT_1"


# Storage-only price per GB-month (us-east-1); PERSISTENT_1 at 200 MB/s/TiB.
FSX_USD_PER_GB_MONTH = {
    DeploymentType.SCRATCH_1: 0.14,
    DeploymentType.SCRATCH_2: 0.14,
    DeploymentType.PERSISTENT_1: 0.29,
}
PERSISTENT_1_THROUGHPUT_MBPS_PER_TIB = 200
HOURS_PER_MONTH = 730
MIN_CAPACITY_GIB = 1200
MAX_CAPACITY_GIB = 1_000_000 // 1200 * 1200


def capacity_step_gib(deployment_type: DeploymentType) -> int:
    """Above 2400 GiB, capacity grows in steps of 3600 (SCRATCH_1) or 2400 GiB (others)."""
    return 3600 if deployment_type is DeploymentType.SCRATCH_1 else 2400


def is_valid_capacity(deployment_type: DeploymentType, gib: int) -> bool:
    if gib in (1200, 2400):
        return True
    return gib > 0 and gib % capacity_step_gib(deployment_type) == 0


def round_up_capacity(deployment_type: DeploymentType, needed_gib: float) -> int:
    """Smallest valid storage capacity that holds ``needed_gib``."""
    if needed_gib <= 1200:
        return 1200
    if needed_gib <= 2400:
        return 2400
    step = capacity_step_gib(deployment_type)
    return int(-(-needed_gib // step) * step)
