"""Size a run's file system for the job's reads, not only for the dataset's bytes.

A Lustre file system's throughput grows with its storage: a 1,200 GiB SCRATCH_2 gives
~234 MB/s, while 160 V100s training ResNet-50 read ~21 GB/s of JPEG records. From the
dataset's size and the job's rate, the cheapest deployment type, capacity and throughput per
TiB that feed the job; a request's own choices win, with a warning when they starve it.

Pure: no AWS calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from traingrid.vocabulary.catalog import (
    FSX_DEFAULT_STORAGE_QUOTA_GIB,
    FSX_TIERS,
    HOURS_PER_MONTH,
    INSTANCE_TYPES,
    MAX_CAPACITY_GIB,
    FsxTier,
    fsx_storage_quota,
    largest_capacity_within,
    round_up_capacity,
)

if TYPE_CHECKING:
    from traingrid.training.run_request import TrainingRunRequest

GIB = 1024**3
MB = 1000**2  # FSx states throughput in MB/s (10^6 bytes)
# Room for checkpoints, logs and Lustre metadata on top of the dataset itself.
CAPACITY_HEADROOM = 1.25
# An ImageNet-like JPEG record (ILSVRC-2012's 1,281,167 training images hold ~140 GB).
DEFAULT_RECORD_BYTES = 110_000
# Objects no larger than this on average are taken for one record each (a folder of images);
# larger ones are shards (TFRecord, RecordIO, tar) holding many.
RECORD_OBJECT_MAX_BYTES = 4 * 1024**2


@dataclass(frozen=True)
class DatasetSize:
    objects: int
    bytes: int


@dataclass(frozen=True)
class ReadDemand:
    """What the job reads: images per second, bytes per image, and so MB/s."""

    images_per_s: int
    images_per_s_source: str
    record_bytes: int
    record_bytes_source: str
    records: int

    @property
    def required_mb_s(self) -> float:
        return self.images_per_s * self.record_bytes / MB


@dataclass(frozen=True)
class FileSystemChoice:
    """A tier at a capacity: what it gives and costs."""

    tier: FsxTier
    capacity_gib: int

    @property
    def throughput_mb_s(self) -> float:
        return self.capacity_gib / 1024 * self.tier.mb_s_per_tib

    @property
    def burst_mb_s(self) -> float | None:
        burst = self.tier.burst_mb_s_per_tib
        return None if burst is None else self.capacity_gib / 1024 * burst

    @property
    def usd_per_hour(self) -> float:
        return self.capacity_gib * self.tier.usd_per_gb_month / HOURS_PER_MONTH

    def describe(self) -> str:
        per_unit = f" at {self.tier.mb_s_per_tib} MB/s/TiB" if self.tier.per_unit else ""
        return (f"{self.tier.deployment_type}{per_unit}, {self.capacity_gib:,} GiB: "
                f"{self.throughput_mb_s:,.0f} MB/s for ${self.usd_per_hour:,.2f}/h")


@dataclass(frozen=True)
class Sizing:
    demand: ReadDemand
    choice: FileSystemChoice
    # Why this choice, and what it cannot do (a starved job, a cheaper tier out of reach).
    notes: tuple[str, ...]
    warnings: tuple[str, ...]

    @property
    def meets(self) -> bool:
        return self.choice.throughput_mb_s >= self.demand.required_mb_s


def read_demand(request: TrainingRunRequest, dataset: DatasetSize) -> ReadDemand:
    instance = INSTANCE_TYPES[request.instance_type]
    gpus = request.nodes * instance.gpus
    if request.expected_images_per_s_per_gpu is not None:
        per_gpu, rate_source = request.expected_images_per_s_per_gpu, "request"
    else:
        per_gpu, rate_source = instance.gpu_images_per_s, f"catalog ({instance.name})"
    if request.dataset_records is not None:
        records, record_source = request.dataset_records, "dataset_records"
        record_bytes = max(1, round(dataset.bytes / records))
    elif dataset.objects and dataset.bytes / dataset.objects <= RECORD_OBJECT_MAX_BYTES:
        records, record_source = dataset.objects, "one record an object"
        record_bytes = max(1, round(dataset.bytes / records))
    else:
        record_bytes, record_source = DEFAULT_RECORD_BYTES, "default (ImageNet-like JPEG)"
        records = max(1, round(dataset.bytes / record_bytes))
    return ReadDemand(per_gpu * gpus, rate_source, record_bytes, record_source, records)


def capacity_needed_gib(dataset: DatasetSize) -> float:
    return dataset.bytes * CAPACITY_HEADROOM / GIB


def _sized(tier: FsxTier, dataset: DatasetSize, required_mb_s: float,
           capacity: int | None, quota_gib: int | None = None) -> FileSystemChoice:
    """``tier`` at ``capacity``, or else at the least capacity that holds the dataset and
    gives ``required_mb_s``: at most the largest file system FSx makes and, with
    ``quota_gib``, the largest within it, but never less than the dataset needs."""
    kind = tier.deployment_type
    if capacity is None:
        for_reads = required_mb_s / tier.mb_s_per_tib * 1024
        limit = MAX_CAPACITY_GIB if quota_gib is None else min(MAX_CAPACITY_GIB, quota_gib)
        holds = round_up_capacity(kind, capacity_needed_gib(dataset))
        capacity = max(holds, min(round_up_capacity(kind, for_reads),
                                  largest_capacity_within(kind, limit)))
    return FileSystemChoice(tier, capacity)


def quota_warnings(choice: FileSystemChoice, dataset: DatasetSize, required_mb_s: float,
                   quota_gib: int, explicit_capacity: bool) -> list[str]:
    """What FSx's storage quota does to the file system: refuses it (above the quota), or
    holds it below the capacity that would feed the job, with the increase to request."""
    kind = choice.tier.deployment_type
    quota = fsx_storage_quota(kind)
    named = f"the account's FSx quota \"{quota.name}\" ({quota.code}), {quota_gib:,} GiB"
    if choice.capacity_gib > quota_gib:
        return [f"{choice.capacity_gib:,} GiB is above {named}: FSx refuses the file system "
                f"(ServiceLimitExceeded). Request an increase: "
                f"{quota.increase_command(choice.capacity_gib)}"
                + ("" if explicit_capacity else
                   f" (the dataset alone needs {capacity_needed_gib(dataset):,.0f} GiB)")]
    if explicit_capacity:
        return []
    unbounded = _sized(choice.tier, dataset, required_mb_s, None)
    if unbounded.capacity_gib > choice.capacity_gib:
        return [f"the file system is held to {choice.capacity_gib:,} GiB by {named}; "
                f"{unbounded.capacity_gib:,} GiB would give the job its "
                f"{required_mb_s:,.0f} MB/s. Request an increase: "
                f"{quota.increase_command(unbounded.capacity_gib)}, then plan with "
                f"FsxStorageQuotaGiB={unbounded.capacity_gib}"]
    return []


def _cheapest_meeting(choices: list[FileSystemChoice], required: float
                      ) -> FileSystemChoice | None:
    meeting = [c for c in choices if c.throughput_mb_s >= required]
    return min(meeting, key=lambda c: (c.usd_per_hour, -c.throughput_mb_s)) if meeting else None


def size_file_system(request: TrainingRunRequest, dataset: DatasetSize,
                     quota_gib: int = FSX_DEFAULT_STORAGE_QUOTA_GIB) -> Sizing:
    """The file system for ``request`` on ``dataset``: the cheapest that meets the job's
    reads among what the request leaves open, within the account's FSx storage quota
    (``quota_gib``, GiB); else the fastest, with a warning saying by how much it falls
    short. A quota that holds it back, or that it exceeds, is a warning naming the increase
    to request."""
    demand = read_demand(request, dataset)
    required = demand.required_mb_s
    fsx = request.fsx
    explicit_type = "deployment_type" in fsx.model_fields_set
    tiers = [t for t in FSX_TIERS if t.import_path
             and (t.deployment_type == fsx.deployment_type if explicit_type
                  else t.deployment_type in ("SCRATCH_2", "PERSISTENT_1"))
             and fsx.per_unit_storage_throughput in (None, t.mb_s_per_tib)]
    choices = [_sized(t, dataset, required, fsx.storage_capacity_gib, quota_gib)
               for t in tiers]
    best = _cheapest_meeting(choices, required)
    notes: list[str] = []
    warnings: list[str] = []
    if best is None:
        best = max(choices, key=lambda c: (c.throughput_mb_s, -c.usd_per_hour))
        short = required - best.throughput_mb_s
        unbounded = _sized(best.tier, dataset, required, fsx.storage_capacity_gib)
        chosen_by = ("the request's fsx" if fsx.model_fields_set
                     else "the account's FSx storage quota"
                     if unbounded.capacity_gib > best.capacity_gib
                     else "the largest file system FSx makes")
        warnings.append(
            f"the file system gives {best.throughput_mb_s:,.0f} MB/s, {short:,.0f} MB/s short "
            f"of the {required:,.0f} MB/s the job reads ({demand.images_per_s:,} images/s of "
            f"{demand.record_bytes / 1000:,.0f} KB): {chosen_by} holds the job to about "
            f"{best.throughput_mb_s / required:.0%} of its rate")
    warnings += quota_warnings(best, dataset, required, quota_gib,
                               fsx.storage_capacity_gib is not None)
    notes.append(f"chosen: {best.describe()}")
    # A cheaper way that a run cannot take yet is worth knowing.
    others = [_sized(t, dataset, required, None) for t in FSX_TIERS if not t.import_path]
    other = _cheapest_meeting(others, required)
    if other is not None and other.usd_per_hour < best.usd_per_hour and not explicit_type:
        notes.append(f"{other.describe()} would cost less, but links S3 only through a data "
                     "repository association, not the ImportPath a run hydrates with")
    return Sizing(demand, best, tuple(notes), tuple(warnings))


def lustre_throughput(choice: FileSystemChoice) -> dict[str, Any]:
    """The CreateFileSystem LustreConfiguration fields the choice sets."""
    if choice.tier.per_unit:
        return {"PerUnitStorageThroughput": choice.tier.mb_s_per_tib}
    return {}


@dataclass(frozen=True)
class EpochTimes:
    """How long an epoch takes at the catalog's (or the request's) rate and the file
    system's throughput, and the first one's reads with and without preloading."""

    compute_s: float  # the GPUs' share: records / images per second
    read_s: float  # the dataset once through the file system
    preload_s: float  # lfs hsm_restore of every file from S3 before training

    @property
    def epoch_s(self) -> float:
        return max(self.compute_s, self.read_s)

    @property
    def first_epoch_lazy_s(self) -> float:
        # Read lazily, each byte crosses the file servers twice in the first epoch: from S3
        # onto their disks, then to the node that opened the file.
        return max(self.compute_s, 2 * self.read_s)

    @property
    def first_epoch_preloaded_s(self) -> float:
        return self.epoch_s


def epoch_times(sizing: Sizing, dataset: DatasetSize) -> EpochTimes:
    bytes_per_s = sizing.choice.throughput_mb_s * MB
    read_s = dataset.bytes / bytes_per_s
    return EpochTimes(sizing.demand.records / sizing.demand.images_per_s, read_s, read_s)
