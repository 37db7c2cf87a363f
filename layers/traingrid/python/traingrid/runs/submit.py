"""Submitting runs on request (the API): validate, name, start once.

A run's name decides whether it is new: Step Functions starts one execution per name. The name
is the request's own ``name``; else, with an Idempotency-Key, derived from that key; else from
the request itself and a short time window, so the same request sent twice in a row (a client
retrying after a lost response) starts one run. An existing run of that name is returned
as it is when it was started by the same request, and refused (409) when by another one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from traingrid.aws import stepfunctions
from traingrid.errors import RequestTooLarge, ResourceNotFound, RunConflict
from traingrid.naming import dataset_subject, execution_name, window_start
from traingrid.observability import logger, metrics
from traingrid.runs.view import CAMPAIGN_FANOUT, TRAINING_RUN, console_url
from traingrid.settings import ApiSettings
from traingrid.vocabulary.statuses import RunStatus

# Without a name or an Idempotency-Key, the same request within this window is one run.
DEDUP_WINDOW_MINUTES = 5
# What each workflow adds to its input, at most, as (times the input, bytes more), so that a
# run started fits Step Functions' 256 KiB (stepfunctions.MAX_PAYLOAD_BYTES) in every state,
# not only in the input StartExecution takes:
# - TrainingRun: Plan's result repeats what the request asked for (its command, its dataset as
#   a URI and as bucket and prefix, its MPI parameters in the job's environment), so the
#   input counts twice; the plan's own fields and the later steps' results (file system, job
#   and attempts, export, archive, a failure's cause) stay under 16 KiB
#   (tests/integration/test_api.py), and 32 KiB is kept for them.
# - CampaignFanout: PlanFanout's plan holds a job for each region the campaign's data is in,
#   each repeating the request's hyperparameters (17 at most, each a short number or word:
#   campaigns/trainer_flags.py); 50 regions' plan takes 125 KB with every hyperparameter at
#   its longest (tests/db/test_fanout_state_size.py), and 160 KiB is kept for it. A campaign's
#   regions are its own bound, not a request's.
STATE_GROWTH = {TRAINING_RUN: (2, 32 * 1024), CAMPAIGN_FANOUT: (1, 160 * 1024)}


@dataclass(frozen=True)
class Submission:
    pipeline: str
    state_machine_arn: str
    name: str
    payload: dict[str, Any]


def canonical(document: Any) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def derived_name(subject: str, request: dict[str, Any], now: datetime,
                 idempotency_key: str | None) -> str:
    if idempotency_key:
        return execution_name(subject, now, "api", "idempotency-key", idempotency_key)
    return execution_name(subject, window_start(now, DEDUP_WINDOW_MINUTES), "api",
                          canonical(request))


def training_submission(body: Any, settings: ApiSettings, now: datetime,
                        idempotency_key: str | None = None, *,
                        command_route: bool = False) -> Submission:
    """A TrainingRun request, validated (every problem at once) and named. Only the command
    route (``command_route``) of a stack that takes commands may name one."""
    # The request model (pydantic) is loaded by the first submission, not at the API's cold
    # start: most of its requests read runs.
    from traingrid.training.run_request import (
        COMMAND_ROUTE,
        parse_request,
        require_runnable_here,
    )

    request = parse_request(body, commands=command_route and settings.allow_run_commands,
                            sent_as=COMMAND_ROUTE if command_route else "POST /runs")
    require_runnable_here(request, settings.data_bucket, settings.allowed_instance_types,
                          settings.node_shared_memory_mib,
                          launches_p3_and_g3=settings.launches_p3_and_g3)
    fields = request.model_dump(mode="json", exclude_none=True)
    name = request.name or derived_name(dataset_subject(request.bucket, request.prefix),
                                        fields, now, idempotency_key)
    return Submission(TRAINING_RUN, settings.training_run_state_machine_arn, name,
                      {"request": fields, "trigger": {"source": "api"}})


def _existing(arn: str) -> dict[str, Any] | None:
    try:
        return stepfunctions.describe_execution(arn)
    except ResourceNotFound:
        return None


def check_fits(submission: Submission) -> None:
    """RequestTooLarge unless the run's input, with what its workflow adds to it, fits Step
    Functions' limit on every state: a run that would not is refused before it starts, not
    failed by States.DataLimitExceeded later (or by StartExecution, over the limit itself)."""
    size = len(stepfunctions.execution_input(submission.payload).encode())
    times, more = STATE_GROWTH[submission.pipeline]
    limit = stepfunctions.MAX_PAYLOAD_BYTES
    if times * size + more <= limit:
        return
    repeats = "its plan repeats the request, " if times > 1 else ""
    raise RequestTooLarge(
        f"This request would start a {submission.pipeline} whose input is {size:,} bytes of "
        f"JSON; {repeats}its workflow adds up to {more // 1024} KiB, and each state of an "
        f"execution is at most {limit:,} bytes (Step Functions' 256 KiB). A "
        f"{submission.pipeline}'s input may be at most {(limit - more) // times:,} bytes: "
        "send less (a shorter command or fewer values).")


def start(submission: Submission) -> dict[str, Any]:
    """Start the submission's run, or return the one of that name it already started.

    An existing run is looked up first: StartExecution answers a repeat of a running
    execution's name and input as if it had started it.
    """
    check_fits(submission)
    arn = stepfunctions.execution_arn(submission.state_machine_arn, submission.name)
    existing = _existing(arn)
    started = False
    if existing is None:
        execution = stepfunctions.start_named_execution(
            submission.state_machine_arn, submission.name, submission.payload)
        started = execution["started"]
        existing = None if started else _existing(arn)
    if existing is not None and json.loads(existing.get("input") or "null") != \
            submission.payload:
        raise RunConflict(
            f"A run named {submission.name} already exists and was started by a different "
            "request. Choose another name, or leave the name out to have one derived."
        )
    logger.info(f"run {submission.name} {'started' if started else 'exists'}",
                extra={"execution_arn": arn})
    metrics.add_metric(name="RunSubmitted" if started else "RunResubmitted", unit="Count",
                       value=1)
    return {
        "name": submission.name,
        "pipeline": submission.pipeline,
        "status": RunStatus.RUNNING if existing is None else existing["status"],
        "started": started,
        "execution_arn": arn,
        "console_url": console_url(arn),
    }
