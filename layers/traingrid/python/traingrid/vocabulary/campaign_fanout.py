"""The CampaignFanout's vocabulary: placement policies, region-job statuses, plans and the
state its steps pass each other.

No SQLAlchemy, pydantic or boto3: the data layer, the request models, the steps and the janitor
all use these names, so nothing here may import any of them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any, NotRequired, TypedDict

from traingrid.vocabulary.statuses import RunStatus
from traingrid.vocabulary.training_run import PollState, StepFailure


class Placement(StrEnum):
    DATA_LOCAL = "data-local"  # train where the data is; move only when it has no headroom
    CHEAPEST = "cheapest"  # train where compute plus copying the data costs least


PLACEMENTS = tuple(p.value for p in Placement)
# A campaign's fleet in each region, unless it names its own.
DEFAULT_CAMPAIGN_INSTANCE_TYPE = "ml.p3.16xlarge"
DEFAULT_CAMPAIGN_INSTANCE_COUNT = 10


class RegionJobStatus(StrEnum):
    """Where one region's job stands: planned, SageMaker's own training-job statuses, and the
    fan-out's two decisions about capacity."""

    PLANNED = "PLANNED"
    IN_PROGRESS = "InProgress"
    STOPPING = "Stopping"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPED = "Stopped"
    CAPACITY_UNAVAILABLE = "CapacityUnavailable"  # refused for capacity: try the next region
    MOVING = "Moving"  # on its way to the next acceptable region


class InputMode(StrEnum):
    """How a region's SageMaker job reads its channel (``sagemaker_job.data_input`` chooses)."""

    FILE = "File"  # copied onto every instance's volume before training
    FAST_FILE = "FastFile"  # streamed from S3 through a POSIX view as it is read


class DataInput(TypedDict):
    """The plan's choice of input mode and volume for a region's job, and why."""

    input_mode: InputMode
    volume_size_gb: int
    input_reason: str


FINAL_JOB_STATUSES = frozenset(
    {RegionJobStatus.COMPLETED, RegionJobStatus.FAILED, RegionJobStatus.STOPPED})
LIVE_REGION_JOB_STATUSES = (RegionJobStatus.IN_PROGRESS, RegionJobStatus.STOPPING)


@dataclass(frozen=True)
class PlacementRequest:
    """What one plan of a campaign asks for, its options filled from the campaign."""

    campaign_id: str
    placement: Placement
    instance_type: str
    instance_count: int
    expected_hours: float
    # Managed spot: regions are priced (and ranked) at their spot price, or at their on-demand
    # price where none is known.
    spot: bool = False

    @property
    def fleet(self) -> str:
        return f"{self.instance_count} × {self.instance_type}"

    @property
    def price(self) -> str:
        """Which price the plan ranks by, in words."""
        return "spot price" if self.spot else "on-demand price"


@dataclass(frozen=True)
class RegionJobPlan:
    region: str  # where it trains
    requested_region: str  # where the data is
    s3_uri: str  # the data's prefix in requested_region
    objects: int
    bytes: int
    instance_type: str
    instance_count: int
    usd_per_hour: float  # on-demand price × count in `region`
    transfer_gb: float  # 0 when region == requested_region
    estimated_usd: float  # usd_per_hour × expected_hours + transfer cost
    reason: str  # why this region, in words
    fallbacks: tuple[str, ...]  # other acceptable regions, cheapest first
    copy_from: str | None  # the source prefix when the data must be copied, else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fallbacks": list(self.fallbacks)}


class Upload(TypedDict):
    """A large object's multipart copy in progress (``campaigns.staging``)."""

    key: str  # the source key
    size: int
    upload_id: str
    next_part: int  # 1-based: the first part not copied yet


class Staging(TypedDict):
    """How far a region's data has been copied into the region its job trains in."""

    region: str  # where it is being copied to
    target: str  # s3://bucket/prefix/ there
    after: str  # the last source key copied in full ("" before the first)
    objects: int
    bytes: int
    calls: int
    done: bool
    upload: NotRequired[Upload | None]


class Move(TypedDict):
    """A region the branch left, and why."""

    region: str
    reason: str
    instance_count: NotRequired[int]


class RegionJob(TypedDict):
    """One region's branch of the fan-out: its plan, then what became of it.

    PlanFanout writes the plan's fields; each step returns the job with its own fields added.
    """

    region: str
    requested_region: str
    s3_uri: str
    objects: int
    bytes: int
    instance_type: str
    instance_count: int  # of the attempt in progress
    requested_instance_count: NotRequired[int]
    min_instance_count: NotRequired[int]  # fewest it may shrink to in a region
    usd_per_hour: float
    transfer_gb: float
    estimated_usd: float
    placement_reason: str
    fallbacks: list[str]
    copy_from: str | None
    hyperparameters: dict[str, Any]
    image_tag: NotRequired[str | None]  # another tag of the training image, for this region
    input_mode: NotRequired[InputMode]  # DataInput's fields: how the job reads its data, why
    volume_size_gb: NotRequired[int]
    input_reason: NotRequired[str]
    attempt: int
    tried: list[Move]
    status: RegionJobStatus
    reason: NotRequired[str]  # the branch's latest failure
    job_name: NotRequired[str]
    job_arn: NotRequired[str]
    s3_input: NotRequired[str]
    staged_bytes: NotRequired[int]  # copied into the job's region (0: trains where the data is)
    staged_region: NotRequired[str]  # where the data is (the data's region, or its copy's)
    staging: NotRequired[Staging]  # the copy in progress
    started_at: NotRequired[str]
    poll: NotRequired[PollState]  # poll.wait_s: the wait's timeout, the safety net's interval
    branch_name: NotRequired[str]  # the branch's own execution (CampaignRegion)
    secondary_status: NotRequired[str | None]
    artifacts: NotRequired[str]


class RegionJobCheck(TypedDict):
    """What one check of a region's SageMaker job adds to the job."""

    status: RegionJobStatus
    secondary_status: str | None
    poll: PollState
    reason: NotRequired[str]
    artifacts: NotRequired[str]


class FanoutPlan(TypedDict):
    """PlanFanout's output: one job per data region; artifact buckets once, by region."""

    run: str
    placement: str
    jobs: list[RegionJob]
    buckets: dict[str, str]
    max_concurrency: int


class RegionJobEvent(TypedDict):
    """The input of a step of one region's branch that needs only the job (CheckRegionJob,
    StopRegionJob, NextRegion)."""

    job: RegionJob


class AwaitRegionJobEvent(RegionJobEvent):
    """AwaitRegionJob's input: the launched job and the wait's task token."""

    token: str


class RegionWake(TypedDict):
    """How a region's wait ended (the task's output, ``$.woken_by``), or why it did not."""

    woken_by: str  # "event" (SageMaker's), "check" (the job had ended when parked), "none"
    status: str  # the job's TrainingJobStatus then
    outcome: str  # "completed", "stale-token", "waiting", "no-wait"


class StageInputEvent(RegionJobEvent):
    campaign: str
    buckets: dict[str, str]  # the artifact bucket of every region a job may train in


class LaunchRegionJobEvent(StageInputEvent):
    execution_name: str
    execution_arn: str


class RegionJobStop(TypedDict):
    """StopRegionJob's output (``$.stopped``): whether it stopped a job, and why (not)."""

    stopped: bool
    reason: str


class RecordRegionJobEvent(RegionJobEvent):
    """RecordRegionJob's input: the branch's job, and its failure if a step of it failed."""

    execution_arn: str
    failure: NotRequired[StepFailure]


class RegionResult(TypedDict):
    """One region's outcome, which replaces its planned job in the execution's state."""

    region: str
    requested_region: str
    status: RegionJobStatus  # a final one
    job_name: str | None
    job_arn: str | None
    artifacts: str | None
    placement_reason: str | None
    moves: list[str]
    cause: str | None


class UnrecordedRegion(TypedDict):
    """A branch whose outcome is not in the campaign database yet: RecordRegionJob failed
    after its retries, or the branch's execution itself failed. FinishFanout records it."""

    unrecorded: bool
    job: RegionJob
    failure: NotRequired[StepFailure]  # the branch's failure, if it failed
    record_failure: NotRequired[StepFailure]  # why recording it failed


class FanoutResults(TypedDict):
    """``$.plan`` once the fan-out has run: each region's result in place of its job."""

    run: str
    placement: str
    jobs: list[RegionResult | UnrecordedRegion]
    buckets: dict[str, str]
    max_concurrency: int


class PlanFanoutEvent(TypedDict):
    """PlanFanout's input: the campaign and the whole execution input (``input.options``
    holds a requested fan-out's options)."""

    campaign: object  # as sent: anyone allowed to start an execution sends what they like
    input: dict[str, Any]
    execution_arn: str
    execution_name: str


class FanoutState(TypedDict, total=False):
    """The execution's state as FinishFanout sees it: what PlanFanout planned and the regions
    did (``plan``), or the step failure that broke the fan-out off (``failure``)."""

    campaign: object  # as the execution's input sent it
    plan: FanoutResults  # the planned jobs still, when ``failure`` says the Map broke off
    failure: StepFailure


class FinishFanoutEvent(TypedDict):
    state: FanoutState
    execution_arn: str
    started_at: str  # the execution's start, ISO 8601


class FanoutOutcome(TypedDict):
    """FinishFanout's output (``$.outcome``)."""

    status: RunStatus  # SUCCEEDED or FAILED
    error: str | None
    cause: str | None
    jobs: list[RegionResult]
