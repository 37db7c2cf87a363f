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
    efa_interfaces: int = 0  # EFA network interfaces (one per network card); 0: TCP only
    efa_rdma: bool = False  # EFA with RDMA reads (libfabric's FI_EFA_USE_DEVICE_RDMA)
    # ResNet-50 training images/s one of its GPUs sustains (mixed precision): what a run's
    # file system must feed unless the request says otherwise (GPU_IMAGES_PER_S below).
    gpu_images_per_s: int = 0


# ResNet-50 v1.5 training throughput per GPU, mixed precision, rounded down: NVIDIA's
# published figures (DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5
# README: ~1,200 images/s on a V100 16/32 GB, ~2,500 on an A100; NVIDIA's "Data Center Deep
# Learning Product Performance" page: H100 SXM ~3,000, A10 ~800 for the A10G's sibling).
# The seed's TensorFlow 1.12/Horovod run reached ~100,000 images/s on 160 V100s (~625 each):
# a request states its own rate with expected_images_per_s_per_gpu.
GPU_IMAGES_PER_S = {"V100": 1200, "A100": 2500, "H100": 3000, "A10G": 800}

INSTANCE_TYPES: dict[str, InstanceType] = {
    it.name: it
    for it in (
        InstanceType("p3.2xlarge", 1, 8, 61 * 1024, 3.06,
                     gpu_images_per_s=GPU_IMAGES_PER_S["V100"]),
        InstanceType("p3.8xlarge", 4, 32, 244 * 1024, 12.24,
                     gpu_images_per_s=GPU_IMAGES_PER_S["V100"]),
        InstanceType("p3.16xlarge", 8, 64, 488 * 1024, 24.48,
                     gpu_images_per_s=GPU_IMAGES_PER_S["V100"]),
        InstanceType("p3dn.24xlarge", 8, 96, 768 * 1024, 31.212, efa_interfaces=1,
                     gpu_images_per_s=GPU_IMAGES_PER_S["V100"]),
        InstanceType("p4d.24xlarge", 8, 96, 1152 * 1024, 32.7726, efa_interfaces=4,
                     efa_rdma=True, gpu_images_per_s=GPU_IMAGES_PER_S["A100"]),
        InstanceType("p5.48xlarge", 8, 192, 2048 * 1024, 55.04, efa_interfaces=32,
                     efa_rdma=True, gpu_images_per_s=GPU_IMAGES_PER_S["H100"]),
        InstanceType("g5.12xlarge", 4, 48, 192 * 1024, 5.672,
                     gpu_images_per_s=GPU_IMAGES_PER_S["A10G"]),
        InstanceType("g5.48xlarge", 8, 192, 768 * 1024, 16.288,
                     gpu_images_per_s=GPU_IMAGES_PER_S["A10G"]),
    )
}

# The type a request trains on unless it names one: its nodes launch on the AMI AWS Batch
# chooses by default (ECS_AL2023_NVIDIA), which p3 and g3 types do not (below).
DEFAULT_INSTANCE_TYPE = "p4d.24xlarge"
# The nodes of a request that does not say.
DEFAULT_NODES = 20

# AWS Batch's ECS compute environments launch GPU types on ECS_AL2023_NVIDIA unless an AMI is
# named (Ec2Configuration.imageIdOverride): "ECS_AL2023_NVIDIA doesn't support p3 and g3
# instance types" (AWS Batch API Reference, Ec2Configuration.imageType). Since 2026-01-12 it is
# the default of new ECS compute environments, and since 2026-06-30 Batch creates none on its
# Amazon Linux 2 AMIs. A family is the name before the size (p3dn of p3dn.24xlarge).
AL2023_NVIDIA_UNSUPPORTED_FAMILIES = ("p3", "g3")


def needs_own_ami(instance_type: str) -> bool:
    """Whether Batch's ECS_AL2023_NVIDIA AMI cannot launch ``instance_type`` (a type, such as
    p3.16xlarge, or a family, such as p3): a compute environment of it needs an AMI of its
    own."""
    family = instance_type.split(".", 1)[0]
    return family.startswith(AL2023_NVIDIA_UNSUPPORTED_FAMILIES)


# The trainer's pre-flight check (traingrid_trainer/preflight.py): before the long run every
# rank measures its training rate on synthetic data, the all-reduce bus bandwidth across all
# ranks and its reads. A rank below PREFLIGHT_MIN_SHARE of the median of the others fails the
# job (exit 75, another attempt on other hosts), as does one below the type's floors: 40% of
# its GPU's published images/s, and 15% of its network's published bandwidth as all-reduce bus
# bandwidth (a ring crosses each node's network once: nccl-tests' bus bandwidth tends to it).
PREFLIGHT_MIN_SHARE = 0.5
PREFLIGHT_MIN_READ_SHARE = 0.25  # reads share the file system: noisier than compute
PREFLIGHT_GPU_FLOOR_SHARE = 0.4
PREFLIGHT_BUS_FLOOR_SHARE = 0.15
PREFLIGHT_SECONDS = 180
# Network bandwidth, Gbit/s, as EC2 publishes it for each type (EFA's where it has EFA).
NETWORK_GBPS = {"p3.2xlarge": 10, "p3.8xlarge": 10, "p3.16xlarge": 25, "p3dn.24xlarge": 100,
                "p4d.24xlarge": 400, "p5.48xlarge": 3200, "g5.12xlarge": 40,
                "g5.48xlarge": 100}


def preflight_thresholds(instance: InstanceType) -> dict[str, float | int | str]:
    """The pre-flight check's thresholds for a job on ``instance`` (the trainer's
    ``TRAINGRID_PREFLIGHT``, JSON)."""
    return {
        "instance_type": instance.name,
        "min_share": PREFLIGHT_MIN_SHARE,
        "min_read_share": PREFLIGHT_MIN_READ_SHARE,
        "min_images_per_s": round(instance.gpu_images_per_s * PREFLIGHT_GPU_FLOOR_SHARE),
        "min_bus_gb_s": round(NETWORK_GBPS[instance.name] / 8 * PREFLIGHT_BUS_FLOOR_SHARE, 2),
        "seconds": PREFLIGHT_SECONDS,
    }


# What a job may ask of a node. Batch registers less memory than is installed (the kernel's and
# the platform's share: an m4.large's 8,192 MiB register as 7,985, 97.5%), and its AMI keeps
# 32 MiB more for the ECS agent; AWS recommends leaving a 5% buffer. A job asking for more than
# a node registers waits in RUNNABLE forever. vCPUs and GPUs register in full.
REGISTERED_MEMORY_SHARE = 0.95
ECS_AGENT_RESERVED_MIB = 32


def job_memory_mib(instance: InstanceType) -> int:
    """The memory a job asks of each node: 95% of what is installed, less the agent's share."""
    return int(instance.memory_mib * REGISTERED_MEMORY_SHARE) - ECS_AGENT_RESERVED_MIB


def resource_requirements(instance: InstanceType) -> list[dict[str, str]]:
    """A node's whole instance, as Batch's ResourceRequirements (what the node can register)."""
    return [
        {"Type": "GPU", "Value": str(instance.gpus)},
        {"Type": "VCPU", "Value": str(instance.vcpus)},
        {"Type": "MEMORY", "Value": str(job_memory_mib(instance))},
    ]


# The image's trainer feeds each rank from a PyTorch DataLoader (traingrid_trainer.config's
# --loader_workers, tested equal): every worker keeps prefetch_factor batches (PyTorch's
# default, 2) in /dev/shm for its rank, each batch_size × 3 × size × size float32 images.
LOADER_WORKERS = 4
LOADER_PREFETCH = 2
IMAGE_SIZE = 224
MIB = 1024**2


def loader_shared_memory_mib(ranks: int, batch_size: int, image_size: int = IMAGE_SIZE,
                             workers: int = LOADER_WORKERS,
                             prefetch: int = LOADER_PREFETCH) -> int:
    """The /dev/shm the trainer's data loaders need in one node's container: ``ranks`` ranks
    (one a GPU), each with ``workers`` workers holding ``prefetch`` batches. The job
    definition's SharedMemorySize (template parameter NodeSharedMemoryMiB) must hold this."""
    batch_bytes = batch_size * 3 * image_size * image_size * 4
    return -(-max(ranks, 1) * workers * prefetch * batch_bytes // MIB)


class DeploymentType(StrEnum):
    """FSx for Lustre deployment types a run may ask for: those hydrated from S3 with
    ImportPath. Not SCRATCH_1 (``REFUSED_DEPLOYMENT_TYPES``)."""

    SCRATCH_2 = "SCRATCH_2"
    PERSISTENT_1 = "PERSISTENT_1"


# Why a run may not ask for a deployment type that FSx still offers.
REFUSED_DEPLOYMENT_TYPES = {
    # FSx for Lustre User Guide, "Deployment options": "Scratch 2 and persistent file systems
    # automatically encrypt data in transit" (SCRATCH_1 does not); "Data repository
    # associations, automatic export, and support for multiple data repositories aren't
    # available on FSx for Lustre 2.10 file systems or Scratch 1 file systems."
    "SCRATCH_1": "SCRATCH_1 is not offered: it does not encrypt data in transit and is FSx's "
                 "legacy scratch type; use SCRATCH_2 (the default: same price, in-transit "
                 "encryption, 6x burst) or PERSISTENT_1",
}

# The Lustre version every run's file system is created at (CreateFileSystem's
# FileSystemTypeVersion). botocore, CreateFileSystemRequest.FileSystemTypeVersion: "2.15 is
# supported by all Lustre deployment types and is recommended for all new file systems.
# Default value is 2.10" (SCRATCH_*, PERSISTENT_1). The nodes' Lustre clients (Amazon Linux
# 2023 hosts, the Ubuntu 24.04 node image) cannot mount 2.10 (FSx for Lustre User Guide,
# "Lustre file system and client kernel compatibility"). ImportPath and ExportPath still apply
# at 2.15: botocore's CreateFileSystemLustreConfiguration refuses them only for PERSISTENT_2
# and file systems with a data repository association, whatever the version.
LUSTRE_VERSION = "2.15"


@dataclass(frozen=True)
class FsxTier:
    """A deployment type at one throughput per TiB of storage, and its price.

    ``deployment_type`` is a string: PERSISTENT_2 is priced here for comparison, but it links
    S3 only through data repository associations, not ImportPath (``import_path``), so a run
    cannot ask for it."""

    deployment_type: str
    mb_s_per_tib: int  # baseline; PerUnitStorageThroughput for the persistent types
    usd_per_gb_month: float
    burst_mb_s_per_tib: int | None = None
    per_unit: bool = False  # the tier is chosen with PerUnitStorageThroughput
    import_path: bool = True


# Storage price per GB-month, us-east-1 (aws.amazon.com/fsx/lustre/pricing, SSD storage);
# throughput per TiB from the FSx for Lustre User Guide ("Aggregate file system performance").
# SCRATCH_1 stays priced for runs recorded before it was refused; sizing never picks it.
FSX_TIERS: tuple[FsxTier, ...] = (
    FsxTier("SCRATCH_1", 200, 0.140),
    FsxTier("SCRATCH_2", 200, 0.140, burst_mb_s_per_tib=1300),
    FsxTier("PERSISTENT_1", 50, 0.145, per_unit=True),
    FsxTier("PERSISTENT_1", 100, 0.210, per_unit=True),
    FsxTier("PERSISTENT_1", 200, 0.290, per_unit=True),
    FsxTier("PERSISTENT_2", 125, 0.145, per_unit=True, import_path=False),
    FsxTier("PERSISTENT_2", 250, 0.210, per_unit=True, import_path=False),
    FsxTier("PERSISTENT_2", 500, 0.340, per_unit=True, import_path=False),
    FsxTier("PERSISTENT_2", 1000, 0.600, per_unit=True, import_path=False),
)
# PerUnitStorageThroughput values a request may name (PERSISTENT_1, the persistent type a run
# can hydrate with ImportPath).
PERSISTENT_1_PER_UNIT_MB_S = tuple(t.mb_s_per_tib for t in FSX_TIERS
                                   if t.deployment_type == "PERSISTENT_1")
HOURS_PER_MONTH = 730
MIN_CAPACITY_GIB = 1200
MAX_CAPACITY_GIB = 1_000_000 // 1200 * 1200




@dataclass(frozen=True)
class FsxStorageQuota:
    """An account-level, adjustable FSx for Lustre storage quota (Service Quotas, service code
    ``fsx``): the GiB all file systems of its deployment types may hold in one region."""

    code: str
    name: str
    default_gib: int

    def increase_command(self, desired_gib: int, region: str | None = None) -> str:
        where = f" --region {region}" if region else ""
        return (f"aws service-quotas request-service-quota-increase --service-code fsx "
                f"--quota-code {self.code} --desired-value {desired_gib}{where}")


# FSx for Lustre User Guide, "Quotas" (quotas you can increase): "Lustre Scratch storage
# capacity 100800: The maximum amount of storage capacity (in GiB) that you can configure for
# all Amazon FSx for Lustre scratch file systems in this account", and likewise Persistent_1
# and Persistent_2; their codes as Service Quotas lists them.
FSX_STORAGE_QUOTAS: dict[str, FsxStorageQuota] = {
    "SCRATCH": FsxStorageQuota("L-AD2FC696", "Lustre Scratch storage capacity", 100_800),
    "PERSISTENT_1": FsxStorageQuota("L-C8640C82", "Lustre Persistent_1 storage capacity",
                                    100_800),
    "PERSISTENT_2": FsxStorageQuota("L-8F1B9C74", "Lustre Persistent_2 storage capacity",
                                    100_800),
}
FSX_DEFAULT_STORAGE_QUOTA_GIB = 100_800


def fsx_storage_quota(deployment_type: str) -> FsxStorageQuota:
    """The storage quota a file system of ``deployment_type`` counts against."""
    return FSX_STORAGE_QUOTAS["SCRATCH" if deployment_type.startswith("SCRATCH")
                              else deployment_type]


def largest_capacity_within(deployment_type: str, limit_gib: int) -> int:
    """The largest valid storage capacity of ``deployment_type`` not above ``limit_gib``
    (0 when even the smallest, 1,200 GiB, is above it)."""
    if limit_gib < 1200:
        return 0
    if limit_gib < 2400:
        return 1200
    step = capacity_step_gib(deployment_type)
    return max(2400, limit_gib // step * step)


def capacity_step_gib(deployment_type: str) -> int:
    """Above 2400 GiB, capacity grows in steps of 3600 (SCRATCH_1, which no run asks for) or
    2400 GiB (the others, PERSISTENT_2 included)."""
    return 3600 if deployment_type == "SCRATCH_1" else 2400


def is_valid_capacity(deployment_type: str, gib: int) -> bool:
    if gib in (1200, 2400):
        return True
    return gib > 0 and gib % capacity_step_gib(deployment_type) == 0


def round_up_capacity(deployment_type: str, needed_gib: float) -> int:
    """Smallest valid storage capacity that holds ``needed_gib``."""
    if needed_gib <= 1200:
        return 1200
    if needed_gib <= 2400:
        return 2400
    step = capacity_step_gib(deployment_type)
    return int(-(-needed_gib // step) * step)
