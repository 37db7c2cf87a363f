"""The TrainingRun's Plan step: validate the request, size the dataset in S3, plan the run.
Only the Plan function loads the request models.

A dataset is sized a bounded part at a time (``training.measure``): one call lists until its
function has ``MARGIN_S`` left (or its page budget is spent) and, if the listing is not done,
returns ``{"measuring": ...}``, which the state machine's MeasureDataset loop passes back.
``POST /plans`` does the same within API Gateway's 29 s: 200 with the plan, or 202 with a
``GET /plans/{token}`` that lists on from where it stopped (the token holds the request and the
progress, nothing else: each GET validates the request again).

The step takes PlanRunEvent (a TypedDict: the execution's name and ARN, which Step Functions
fills in, and the request as sent) and returns the RunPlan. The request, the one untrusted
part, is parsed once with the TrainingRunRequest model (pydantic, as Powertools' parser does,
but reporting every problem as RequestInvalid); the plan is made from the model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traingrid import clock, opaque
from traingrid.errors import CommandNotPermitted, RequestInvalid
from traingrid.notifications import run_status as status_events
from traingrid.observability import logger
from traingrid.training import measure
from traingrid.training.job_shape import DEFAULT_BACKEND, Backend, backend_of
from traingrid.training.plan import DRY_RUN, DatasetSize, plan_run, plan_view
from traingrid.training.run_request import (
    MAX_KEY_BYTES,
    TrainingRunRequest,
    parse_request,
    require_runnable_here,
)
from traingrid.vocabulary.catalog import FSX_DEFAULT_STORAGE_QUOTA_GIB
from traingrid.vocabulary.statuses import RunStatus
from traingrid.vocabulary.training_run import Measuring, MeasuringPlan, PlanRunEvent, RunPlan

if TYPE_CHECKING:
    from traingrid.settings import Settings


# What a call leaves itself after listing: to plan and answer (the Plan step's 60 s), or
# to answer before API Gateway's 29 s integration timeout (the API function's own is 29 s).
MARGIN_S = 15.0
API_MARGIN_S = 9.0
# The MeasureDataset loop's rounds, at most: each is 7 events of the execution's history
# (Choice 2, Lambda Task 5), whose 25,000 events a Standard workflow cannot exceed; a failure
# there cannot be caught. 2,500 rounds (17,500 events) leave the rest of the run its room, and
# past them the run fails as a request: explained and recorded (docs/training-run.md).
MAX_PARTS = 2500
# The most a plan's token inflates to: a request and one key.
TOKEN_BYTES = 64 * 1024
# A count in a token: what S3 and a database's bigint hold (a listing never counts past it).
MAX_COUNT = 2**63 - 1
COUNTS = ("objects", "bytes", "pages", "parts")


def _budget(settings: Settings, remaining_ms: int, margin_s: float) -> measure.Budget:
    return measure.budget_for(settings.plan_list_pages, remaining_ms / 1000 - margin_s)


def size_part(bucket: str, prefix: str, budget: measure.Budget, progress: Measuring | None
              ) -> tuple[Measuring, DatasetSize | None]:
    """One part of the dataset's listing, and its size once listed (``measure.measure``)."""
    return measure.measure(bucket, prefix, budget, progress)


def plan(event: PlanRunEvent, settings: Settings, remaining_ms: int = 60_000
         ) -> RunPlan | MeasuringPlan:
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
    progress, dataset = size_part(request.bucket, request.prefix,
                                  _budget(settings, remaining_ms, MARGIN_S),
                                  event.get("measuring"))
    if dataset is None:
        if progress["parts"] >= MAX_PARTS:
            raise RequestInvalid([{"pointer": "/dataset", "message": (
                f"{request.dataset} was still being listed after {progress['parts']} parts "
                f"({progress['objects']:,} objects so far): more than one run's history can "
                "hold; split it into folders (listed in parallel) or several datasets")}])
        logger.info("dataset listed in part", extra={"measuring": progress})
        return {"measuring": progress}
    planned = plan_run(
        request,
        run=event["run"],
        execution_arn=event["execution_arn"],
        dataset=dataset,
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


def dry_run(request: TrainingRunRequest, dataset: DatasetSize,
            backend: Backend = DEFAULT_BACKEND,
            fsx_quota_gib: int = FSX_DEFAULT_STORAGE_QUOTA_GIB) -> dict[str, Any]:
    """The plan ``request`` would get (``plan_view``) on ``dataset``'s size, starting
    nothing."""
    planned = plan_run(request, run=request.name or DRY_RUN, execution_arn=DRY_RUN,
                       dataset=dataset, now=clock.now(), backend=backend,
                       fsx_quota_gib=fsx_quota_gib)
    return plan_view(planned)


def plan_request(body: Any, settings: Settings, remaining_ms: int = 29_000,
                 token: str | None = None) -> tuple[int, dict[str, Any]]:
    """``POST /plans`` (``body``) and ``GET /plans/{token}``: a request as ``POST /runs``
    takes it (a command too: nothing runs), checked against this stack, planned on the
    dataset as it is now. (200, the plan) once the dataset is listed, else (202, how far the
    listing is and the GET that goes on)."""
    progress: Measuring | None = None
    if token is not None:
        body, progress = _read_token(token)
    request = parse_request(body, commands=True, sent_as="POST /plans")
    require_runnable_here(request, settings.data_bucket, settings.allowed_instance_types,
                          settings.node_shared_memory_mib,
                          launches_p3_and_g3=settings.launches_p3_and_g3)
    progress, dataset = size_part(request.bucket, request.prefix,
                                  _budget(settings, remaining_ms, API_MARGIN_S), progress)
    if dataset is None:
        following = _token(body, progress)
        return 202, {"status": "MEASURING", "dataset": {
            "uri": request.dataset, "objects_so_far": progress["objects"],
            "bytes_so_far": progress["bytes"], "pages": progress["pages"],
            "parts": progress["parts"]}, "next": f"/plans/{following}"}
    return 200, dry_run(request, dataset, backend=backend_of(settings.training_backend),
                        fsx_quota_gib=settings.fsx_storage_quota_gib)


def _token(body: Any, progress: Measuring) -> str:
    return opaque.encode({"request": body, "measuring": progress})


def _key_bytes(key: str) -> int | None:
    try:
        return len(key.encode())
    except UnicodeEncodeError:  # a lone surrogate: no key S3 could be asked for
        return None


def progress_problems(progress: Any) -> list[str]:
    """Why ``progress`` is not where a listing can stand: each count a whole number from 0
    to MAX_COUNT, ``after`` a key S3 can be asked for (empty before the first)."""
    if not isinstance(progress, dict):
        return ["it holds no listing's progress"]
    problems = [f"{name} is {progress.get(name)!r:.40}, not a whole number from 0 to "
                f"{MAX_COUNT}" for name in COUNTS
                if not (type(progress.get(name)) is int and 0 <= progress[name] <= MAX_COUNT)]
    after = progress.get("after")
    size = _key_bytes(after) if isinstance(after, str) else None
    if size is None or size > MAX_KEY_BYTES:
        problems.append(f"after is not an S3 key of at most {MAX_KEY_BYTES} bytes in UTF-8")
    return problems


def _read_token(token: str) -> tuple[Any, Measuring]:
    """The request and progress of a token ``_token`` made. Unsigned: it holds only what its
    caller could send in a POST /plans, and each field is checked here (the request again by
    ``plan_request``); a made-up one is a 400 saying what is wrong with it."""
    try:
        document = opaque.decode(token, TOKEN_BYTES)
    except ValueError as error:
        document, problems = None, [str(error)]
    else:
        problems = progress_problems(document.get("measuring")
                                     if isinstance(document, dict) else None)
        if isinstance(document, dict) and "request" not in document:
            problems.append("it holds no request")
    if problems or not isinstance(document, dict):
        raise RequestInvalid([{"pointer": "", "message": (
            f"this is not a plan's token ({why}): follow the 'next' of a 202 from POST "
            "/plans")} for why in problems], "GET /plans/{token}")
    progress = document["measuring"]
    checked: Measuring = {"objects": progress["objects"], "bytes": progress["bytes"],
                          "pages": progress["pages"], "parts": progress["parts"],
                          "after": progress["after"]}
    return document["request"], checked
