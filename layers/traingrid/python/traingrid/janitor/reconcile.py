"""Runs whose execution ended without recording its outcome get it from the janitor: campaign
runs still RUNNING in the database, and TrainingRuns with no record (stopped, timed out, or
their record step failed). The cause says how the execution ended and what was released."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from traingrid import db
from traingrid.aws import stepfunctions
from traingrid.janitor.decide import GONE, RELEASING, RUNNING, Decision
from traingrid.janitor.inventory import Inventory
from traingrid.observability import logger
from traingrid.training.outcome import as_dict, from_execution
from traingrid.vocabulary.training_run import RecordedRun

# How many of the newest TrainingRun executions each pass checks for a recorded outcome.
RECENT_RUNS = 100


class Reconcile:
    def __init__(self, inventory: Inventory, decisions: list[Decision], now: datetime) -> None:
        self.inventory, self.decisions, self.now = inventory, decisions, now
        self.attempts = inventory.attempts

    def campaign_runs(self) -> list[dict[str, Any]]:
        """Campaign runs still RUNNING in the database whose execution has ended: SUCCEEDED if
        every region completed, else FAILED, saying how the execution ended and what the
        janitor released."""
        def running() -> list[str]:
            with db.transaction(self.inventory.database()) as session:
                return [run.execution_arn for run in db.RunRepository(session).running()]

        recorded = []
        for arn in self.attempts.attempt("reading the running campaign runs", running, []):
            status = self.inventory.status(arn)
            if status is None or status in RUNNING:
                continue
            cause, ended_at = self.outcome(arn, status)
            job_cause = f"the fan-out ended {status} before this region's job had an outcome"
            entry = self.attempts.attempt(f"recording the outcome of {arn}", functools.partial(
                self.close, arn, status, ended_at, cause, job_cause), None)
            if entry:
                logger.info("janitor: recorded a campaign run's outcome", extra=entry)
                recorded.append(entry)
        return recorded

    def training_runs(self, trigger: dict[str, Any]) -> list[RecordedRun]:
        """TrainingRuns that ended without recording their outcome: the execution that
        triggered this pass, those whose resources were found, and the newest ones of the
        state machine."""
        machine = self.inventory.settings.training_run_state_machine_arn
        prefix = stepfunctions.execution_arn(machine, "")
        executions = self.inventory.executions
        arns = {arn for arn in [trigger.get("execution_arn"), *executions]
                if isinstance(arn, str) and arn.startswith(prefix)}
        newest = self.attempts.attempt("listing the newest training runs", lambda: stepfunctions.
                                       list_executions(machine, RECENT_RUNS)[0], [])
        arns |= {e["executionArn"] for e in newest if e["status"] not in RUNNING}

        def unrecorded() -> list[str]:
            with db.transaction(self.inventory.database()) as session:
                return db.TrainingRunRepository(session).missing(sorted(arns))

        recorded: list[RecordedRun] = []
        for arn in self.attempts.attempt("reading the recorded training runs", unrecorded, []):
            status = self.inventory.status(arn)
            described = executions.get(arn)
            if status is None or described is None or status in RUNNING:
                continue
            cause = self.outcome(arn, status, "Start the run again.")[0]
            entry = self.attempts.attempt(f"recording the outcome of {arn}", functools.partial(
                self.record_training_run, from_execution(described, cause)), None)
            if entry:
                logger.info("janitor: recorded a training run's outcome",
                            extra={"training_run": entry})
                recorded.append(entry)
        return recorded

    def record_training_run(self, record: dict[str, Any]) -> RecordedRun | None:
        with db.transaction(self.inventory.database()) as session:
            row, written = db.TrainingRunRepository(session).record_if_absent(record)
            return as_dict(row) if written else None

    def close(self, arn: str, status: str, ended_at: datetime, cause: str,
              job_cause: str) -> dict[str, Any]:
        with db.transaction(self.inventory.database()) as session:
            run = db.RunRepository(session).close(arn, ended_at, cause, job_cause)
            return {"execution_arn": arn, "execution_status": status, "status": run.status,
                    "cause": run.failure_cause}

    def outcome(self, arn: str, status: str,
                again: str = "Start the fan-out again to train on this data."
                ) -> tuple[str, datetime]:
        described = self.inventory.executions.get(arn) or {}
        ended_at = described.get("stopDate") or self.now
        how = f"The execution ended {status}" if status != GONE else "The execution is gone"
        if described.get("error"):
            how += f" ({described['error']}: {described.get('cause') or 'no cause given'})"
        released = [f"{d.action} {d.resource.kind} {d.resource.id} ({d.resource.region})"
                    for d in self.decisions
                    if d.resource.execution_arn == arn and d.action in RELEASING]
        what = ("the janitor released what it left: " + "; ".join(released) if released
                else "nothing of it was left running")
        return f"{how} before recording its outcome; {what}. {again}", ended_at
