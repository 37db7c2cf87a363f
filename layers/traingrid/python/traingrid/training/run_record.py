"""The TrainingRun step that writes the run's outcome to the campaign database. Only the
function that runs it loads SQLAlchemy, and only when it runs (not at a cold start).

It takes RecordRunEvent, a TypedDict checked by mypy, not parsed at run time (pydantic would
cost the cold start ~80 ms): the run's state is read field by field, defensively
(``outcome.from_state``), since a run that failed early has little of it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from traingrid import clock
from traingrid.aws.secrets import connection_url
from traingrid.costs import receipt
from traingrid.notifications import run_status as status_events
from traingrid.observability import logger, metrics
from traingrid.settings import DatabaseSettings
from traingrid.training.outcome import as_dict, from_state
from traingrid.vocabulary.training_run import RecordedRun, RecordRunEvent, TrainingRunState


def record_run(event: RecordRunEvent, settings: DatabaseSettings) -> RecordedRun:
    """Write the outcome ``event["status"]`` of the run whose state is ``event["state"]``."""
    from traingrid.db.engine import transaction
    from traingrid.db.repositories import TrainingRunRepository

    now = clock.now()
    outcome = from_state(event["state"], event["status"], event["execution_arn"],
                         clock.parse(event.get("started_at")) or now, now)
    cost = run_cost(event["state"])
    outcome |= {"cost": cost, "cost_usd": cost["actual"]["total"]}
    with transaction(connection_url(settings)) as session:
        recorded = as_dict(TrainingRunRepository(session).record(outcome))
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


def run_cost(state: TrainingRunState) -> dict[str, Any]:
    """The run's receipt as its last step sees it: no execution history here (the function
    reaches only the database), so its file system's time is the part the run measured
    (hydration and each attempt's Batch time), and its state transitions are left to
    GET /runs/{name}, which counts them."""
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
