"""Training waits whose job has ended, completed by the janitor: Batch's state-change event is
a hint that can be lost, so every pass describes the jobs of the parked waits and wakes those
whose job is done, with the same decision and payload as the event (``training.completion``).
A lost event then costs at most one janitor interval, and the wait's own timeout can be long.
Completing a wait the event completed too is harmless: the second completion finds the token
stale and is left quietly."""

from __future__ import annotations

from typing import Any

from traingrid.aws import batch, task_tokens
from traingrid.aws.task_tokens import ParkedWait
from traingrid.observability import logger, metrics
from traingrid.training import completion


def ended(parked: list[ParkedWait], descriptions: list[dict[str, Any]],
          fallback_s: int) -> list[tuple[ParkedWait, Any]]:
    """The waits to wake and each one's next state: those whose job Batch reports done. A job
    still queued or running is left to its event and its wait's timeout (which enforce its
    limits); one Batch no longer knows is left to the wait's timeout, which says so."""
    by_id = {d["jobId"]: d for d in descriptions}
    woken = []
    for wait in parked:
        description = by_id.get(wait.job_id)
        if description is None:
            continue
        state, _ = completion.assess(wait, description, fallback_s)
        if state.done:
            woken.append((wait, state))
    return woken


def reconcile(table: str, fallback_s: int) -> list[dict[str, Any]]:
    """Wake every parked wait whose job has ended; what was woken."""
    parked = task_tokens.all_parked(table)
    if not parked:
        return []
    descriptions = batch.describe_jobs(sorted({w.job_id for w in parked}))
    woken = []
    for wait, state in ended(parked, descriptions, fallback_s):
        result = completion.wake(wait, state, table)
        # "completed": its event was lost; "stale-token": the execution had moved on already.
        logger.info(f"janitor: job {wait.job_id} ended {state.status}: its wait "
                    f"{result['outcome']}", extra={"outcome": result["outcome"]})
        woken.append({"job_id": wait.job_id, "status": state.status,
                      "outcome": result["outcome"]})
    if woken:
        metrics.add_metric(name="TrainingWaitsReconciled", unit="Count", value=len(woken))
    return woken
