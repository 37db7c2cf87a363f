"""The TrainingRun step that writes the run's outcome to the campaign database.

It takes RecordRunEvent, a TypedDict checked by mypy, not parsed at run time (the state machine
wrote it): the run's state is read field by field, defensively
(``outcome.from_state``), since a run that failed early has little of it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from traingrid import clock, db
from traingrid.aws import batch, stepfunctions
from traingrid.aws.secrets import connection_url
from traingrid.costs import receipt
from traingrid.errors import TrainGridError
from traingrid.notifications import run_status as status_events
from traingrid.observability import logger, metrics
from traingrid.settings import DatabaseSettings
from traingrid.training.outcome import as_dict, from_state
from traingrid.vocabulary.training_run import RecordedRun, RecordRunEvent, TrainingRunState


def record_run(event: RecordRunEvent, settings: DatabaseSettings) -> RecordedRun:
    """Write the outcome ``event["status"]`` of the run whose state is ``event["state"]``."""
    now = clock.now()
    outcome = from_state(event["state"], event["status"], event["execution_arn"],
                         clock.parse(event.get("started_at")) or now, now)
    cost = run_cost(event["state"], event["execution_arn"], event["status"])
    outcome |= {"cost": cost, "cost_usd": cost["actual"]["total"]}
    with db.transaction(connection_url(settings)) as session:
        recorded = as_dict(db.TrainingRunRepository(session).record(outcome))
    logger.info(f"run {recorded['name']} recorded {recorded['status']}",
                extra={"training_run": recorded})
    metrics.add_metric(name=f"TrainingRuns{outcome['status'].title()}", unit="Count", value=1)
    # What the stack's dashboard shows: cost per day, and how long jobs waited for instances.
    metrics.add_metric(name="RunCostUSD", unit="None", value=outcome["cost_usd"])
    job = event["state"].get("job")
    if isinstance(job, dict) and isinstance(job.get("waiting_s"), int | float):
        metrics.add_metric(name="QueueWaitSeconds", unit="Seconds", value=job["waiting_s"])
    status_events.publish([status_events.change(
        "TrainingRun", event["execution_arn"], outcome["status"], pipeline="TrainingRun",
        dataset=outcome.get("dataset"), instance_type=outcome.get("instance_type"),
        error=outcome.get("error"), cause=outcome.get("failure_cause"),
        cost_usd=outcome["cost_usd"])])
    return recorded


# The states a run enters after its record step: RecordRun → Summarize → Succeeded, and
# RecordFailure → Failed (statemachines/training_run.asl.json).
LATER_TRANSITIONS = {"SUCCEEDED": 2, "FAILED": 1}


def run_cost(state: TrainingRunState, execution_arn: str, status: str) -> dict[str, Any]:
    """The run's receipt as GET /runs/{name} gives it once the run has ended
    (``costs.receipt.training_run_cost``, as ``runs.view.cost``): from its execution's
    history (transitions, Lambda invocations, the file system's lifetime) and Batch's
    timestamps of its attempts (their queue wait included), with the states still to come
    after this step counted. Where the history or Batch cannot be read, the receipt of the
    run's state alone (``state_cost``)."""
    plan = state.get("plan")
    estimate = plan.get("estimate") if isinstance(plan, dict) else None
    try:
        events = stepfunctions.execution_history(execution_arn)
        return receipt.training_run_cost(
            events, clock.service_now(), False,
            dict(estimate) if isinstance(estimate, dict) else None, clock.service_seconds,
            batch.describe_jobs, int(clock.now().timestamp() * 1000),
            LATER_TRANSITIONS.get(status, 1))
    except TrainGridError as error:
        logger.warning("receipt from the run's state alone", extra={"error": str(error)})
        return state_cost(state)


def state_cost(state: TrainingRunState) -> dict[str, Any]:
    """The run's receipt from its state alone (when its history cannot be read): its file
    system's time is the part the run measured (hydration and each attempt's Batch time),
    and its state transitions are left to GET /runs/{name}, which counts them."""
    usage = receipt.from_state(state, 0.0, "")
    if usage.file_system is not None:
        file_system = state.get("file_system")
        hydrate = (file_system.get("hydrate_s") if file_system else None) or 0
        measured = hydrate + sum(a.seconds for a in usage.attempts)
        usage.file_system = replace(
            usage.file_system, seconds=float(measured),
            source="hydration + the attempts' Batch time (at least its lifetime)")
    usage.orchestration_source = "not counted by the record step: GET /runs/{name} counts it"
    plan = state.get("plan")
    estimate = plan.get("estimate") if isinstance(plan, dict) else None
    return receipt.receipt(usage, estimate if isinstance(estimate, dict) else None)
