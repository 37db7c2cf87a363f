"""One pass of the janitor: find TrainGrid's FSx file systems, Batch jobs and SageMaker
training jobs (``inventory``), release those whose execution has ended (``decide``,
``release``), record the outcome of runs whose execution ended without recording it
(``reconcile``), and wake the training waits whose job ended without its event (``waits``).

It runs on a schedule, and at once when an execution of this stack ends ABORTED, TIMED_OUT or
FAILED (Step Functions cannot catch a StopExecution, so no state of the run itself cleans up
then). A pass is idempotent: what is already released is not found again, what is being
released (an export, a stopping job) is waited for by a later pass. One failing call does not
stop the pass: it is reported, and the next pass tries again. Passes never overlap: each holds
the janitor's lease (``aws.leases``) while it runs, and one started while another holds it
ends at once, leaving the work to the pass that runs.
"""

from __future__ import annotations

import functools
import uuid
from datetime import timedelta
from typing import Any

from traingrid import clock
from traingrid.aws import leases
from traingrid.errors import RequestInvalid
from traingrid.janitor.calls import Attempts
from traingrid.janitor.decide import FILE_SYSTEM, PENDING, RELEASING, RUNNING, Action, decide
from traingrid.janitor.inventory import Inventory
from traingrid.janitor.parked_waits import reconcile as reconcile_waits
from traingrid.janitor.reconcile import Reconcile
from traingrid.janitor.release import act
from traingrid.observability import logger, metrics
from traingrid.settings import JanitorSettings

STATUS_CHANGE = "Step Functions Execution Status Change"
LEASE = "janitor-pass"
# A pass ends within the function's Timeout (300 s), so a lease outlives any pass; one whose
# pass was cut short frees itself this long after it was taken.
PASS_LEASE_S = 360


def trigger_of(event: dict[str, Any]) -> dict[str, Any]:
    """What started this pass: the schedule, an execution's end, or a person (``{}``)."""
    if not event:
        return {"source": "manual"}
    kind = event.get("detail-type")
    if kind == "Scheduled Event":
        return {"source": "schedule", "time": event.get("time")}
    if kind == STATUS_CHANGE:
        detail = event.get("detail") or {}
        return {"source": "execution", "execution_arn": detail.get("executionArn"),
                "status": detail.get("status")}
    raise RequestInvalid([{"pointer": "/detail-type", "message": (
        f"the janitor runs on its schedule (Scheduled Event), when an execution ends "
        f"({STATUS_CHANGE}) or by hand with an empty event, not on {kind!r}")}],
        source="janitor event")


def sweep(event: dict[str, Any], settings: JanitorSettings) -> dict[str, Any]:
    """One pass, unless another holds the janitor's lease (then nothing is done)."""
    trigger = trigger_of(event)
    table, holder = settings.janitor_lease_table, str(uuid.uuid4())
    if table and not leases.acquire(table, LEASE, holder, clock.now().timestamp(),
                                    PASS_LEASE_S):
        logger.info("janitor pass skipped: another pass is running", extra={"trigger": trigger})
        metrics.add_metric(name="JanitorPassesSkipped", unit="Count", value=1)
        return {"trigger": trigger, "skipped": "another janitor pass is running"}
    try:
        return _pass(trigger, settings)
    finally:
        if table:
            leases.release(table, LEASE, holder)


def _pass(trigger: dict[str, Any], settings: JanitorSettings) -> dict[str, Any]:
    now = clock.now()
    attempts = Attempts()
    # First, so a run whose job's event was lost moves on (and cleans up) while this pass runs.
    woken = attempts.attempt("waking the training waits whose job ended", functools.partial(
        reconcile_waits, settings.job_tokens_table, settings.job_event_fallback_s),
        []) if settings.job_tokens_table else []
    inventory = Inventory(settings, attempts)
    regions = inventory.regions()
    found = inventory.resources(regions)
    statuses = {arn: status for arn in {r.execution_arn for r in found if r.execution_arn}
                if (status := inventory.status(arn)) is not None}
    # A file system of an ended run is read for what its run left; one whose contents could
    # not be read stays, for the next pass.
    resources = [attempts.attempt(f"reading what {r.id} holds",
                                  functools.partial(inventory.with_outputs, r), None)
                 if r.kind == FILE_SYSTEM and statuses.get(r.execution_arn or "") not in (
                     None, *RUNNING) else r for r in found]
    decisions = decide([r for r in resources if r is not None], statuses, now,
                       timedelta(days=settings.retention_days), settings.state_machines)
    released = [entry for d in decisions if d.action in RELEASING
                if (entry := attempts.attempt(f"{d.action} {d.resource.kind} {d.resource.id}",
                                              functools.partial(act, d, settings.data_bucket),
                                              None))]
    reconcile = Reconcile(inventory, decisions, now)
    outcome = {
        "trigger": trigger, "swept_at": clock.iso(now), "regions": regions,
        "released": released, "waits_woken": woken,
        "waiting": [d.as_dict() for d in decisions if d.action is Action.WAIT],
        "pending": sum(d.action in PENDING for d in decisions),
        "kept": sum(d.action is Action.KEEP for d in decisions),
        "runs_recorded": reconcile.campaign_runs(),
        "training_runs_recorded": reconcile.training_runs(trigger),
        "errors": attempts.errors,
    }
    logger.info("janitor pass", extra={k: v for k, v in outcome.items() if k != "released"}
                | {"released": len(released)})
    # Every pass counts, so an alarm can tell when the janitor stops running.
    metrics.add_metric(name="JanitorPasses", unit="Count", value=1)
    # The file systems alive as the pass found them (every 5 minutes): the dashboard's count.
    metrics.add_metric(name="FileSystemsAlive", unit="Count",
                       value=sum(r.kind == FILE_SYSTEM for r in found))
    return outcome
