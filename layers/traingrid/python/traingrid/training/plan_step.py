"""The TrainingRun's Plan step: validate the request, size the dataset in S3, plan the run.
Only the Plan function loads the request models.

The step takes PlanRunEvent (a TypedDict: the execution's name and ARN, which Step Functions
fills in, and the request as sent) and returns the RunPlan. The request, the one untrusted
part, is parsed once with the TrainingRunRequest model (pydantic, as Powertools' parser does,
but reporting every problem as RequestInvalid); the plan is made from the model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traingrid import clock
from traingrid.aws import s3
from traingrid.errors import CommandNotPermitted, DatasetNotFound, RequestInvalid
from traingrid.notifications import run_status as status_events
from traingrid.observability import logger
from traingrid.training.job_shape import DEFAULT_BACKEND, Backend, backend_of
from traingrid.training.plan import DRY_RUN, DatasetSize, plan_run, plan_view
from traingrid.training.run_request import (
    TrainingRunRequest,
    parse_request,
    require_runnable_here,
)
from traingrid.vocabulary.catalog import FSX_DEFAULT_STORAGE_QUOTA_GIB
from traingrid.vocabulary.statuses import RunStatus
from traingrid.vocabulary.training_run import PlanRunEvent, RunPlan

if TYPE_CHECKING:
    from traingrid.settings import Settings


def measure_dataset(bucket: str, prefix: str) -> DatasetSize:
    objects = total = 0
    for item in s3.objects_under(bucket, prefix):
        objects += 1
        total += item["size"]
    if not objects:
        raise DatasetNotFound(
            f"No objects under s3://{bucket}/{prefix}: upload the dataset there first."
        )
    return DatasetSize(objects, total)


def plan(event: PlanRunEvent, settings: Settings) -> RunPlan:
    # Whoever may start an execution can send any request: a command only where the stack
    # takes them (manifests are refused one earlier, by the trigger).
    try:
        request = parse_request(
            event.get("request"), commands=settings.allow_run_commands,
            sent_as="A run of this stack (deployed without AllowRunCommands)")
    except CommandNotPermitted as refused:
        raise RequestInvalid(refused.problems) from None
    require_runnable_here(request, settings.data_bucket, settings.allowed_instance_types,
                          settings.node_shared_memory_mib,
                          launches_p3_and_g3=settings.launches_p3_and_g3)
    planned = plan_run(
        request,
        run=event["run"],
        execution_arn=event["execution_arn"],
        dataset=measure_dataset(request.bucket, request.prefix),
        now=clock.now(),
        backend=backend_of(settings.training_backend),
        fsx_quota_gib=settings.fsx_storage_quota_gib,
    )
    reads = planned["reads"]
    for warning in reads["warnings"]:
        # The run goes on as asked; whoever reads its log learns why it trains slowly.
        logger.warning("file system starves the job: %s", warning, extra={
            "required_mb_s": reads["required_mb_s"],
            "throughput_mb_s": reads["throughput_mb_s"]})
    status_events.publish([status_events.change(
        "TrainingRun", event["execution_arn"], RunStatus.RUNNING, pipeline="TrainingRun",
        dataset=request.dataset, instance_type=request.instance_type,
        nodes=planned["job"]["requested_nodes"])])
    return planned


def dry_run(request: TrainingRunRequest, dataset: DatasetSize | None = None,
            backend: Backend = DEFAULT_BACKEND,
            fsx_quota_gib: int = FSX_DEFAULT_STORAGE_QUOTA_GIB) -> dict[str, Any]:
    """The plan ``request`` would get (``plan_view``), starting nothing: on ``dataset``'s
    size when given, else on what is under the dataset prefix now."""
    size = dataset or measure_dataset(request.bucket, request.prefix)
    planned = plan_run(request, run=request.name or DRY_RUN, execution_arn=DRY_RUN,
                       dataset=size, now=clock.now(), backend=backend,
                       fsx_quota_gib=fsx_quota_gib)
    return plan_view(planned)


def plan_request(body: Any, settings: Settings) -> dict[str, Any]:
    """``POST /plans``: a request as ``POST /runs`` takes it (a command too: nothing runs),
    checked against this stack, planned on the dataset as it is now."""
    request = parse_request(body, commands=True, sent_as="POST /plans")
    require_runnable_here(request, settings.data_bucket, settings.allowed_instance_types,
                          settings.node_shared_memory_mib,
                          launches_p3_and_g3=settings.launches_p3_and_g3)
    return dry_run(request, backend=backend_of(settings.training_backend),
                   fsx_quota_gib=settings.fsx_storage_quota_gib)
