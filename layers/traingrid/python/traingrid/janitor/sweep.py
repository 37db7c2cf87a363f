"""One pass of the janitor: find TrainGrid's FSx file systems, Batch jobs and SageMaker
training jobs, release those whose execution has ended (``decide``), and record the outcome of
campaign runs and TrainingRuns whose execution ended without recording it.

It runs on a schedule, and at once when an execution of this stack ends ABORTED, TIMED_OUT or
FAILED (Step Functions cannot catch a StopExecution, so no state of the run itself cleans up
then). A pass is idempotent: what is already released is not found again, what is being
released (an export, a stopping job) is waited for by a later pass. One failing call does not
stop the pass: it is reported, and the next pass tries again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from traingrid import clock
from traingrid.aws import batch, fsx, s3, sagemaker, stepfunctions
from traingrid.aws.clients import home_region
from traingrid.aws.secrets import connection_url
from traingrid.campaigns.model import LIVE_REGION_JOB_STATUSES
from traingrid.db.engine import transaction
from traingrid.db.repositories import RegionRepository, RunRepository, TrainingRunRepository
from traingrid.errors import RequestInvalid, ResourceNotFound, TrainGridError
from traingrid.janitor.decide import (
    BATCH_JOB,
    EXECUTION_TAG,
    EXPIRES_TAG,
    FILE_SYSTEM,
    GONE,
    LIVE_BATCH_STATUSES,
    PENDING,
    RELEASING,
    RETAINED_BY_JANITOR,
    RETAINED_TAG,
    RUNNING,
    TRAINING_JOB,
    Action,
    Decision,
    Export,
    JobRun,
    Resource,
    decide,
    owned_by,
)
from traingrid.observability import logger, metrics
from traingrid.settings import JanitorSettings
from traingrid.training import archive
from traingrid.training.manifest import output_index
from traingrid.training.outcome import as_dict, from_execution
from traingrid.training.plan import MANIFEST_NAME, archive_prefix

STATUS_CHANGE = "Step Functions Execution Status Change"
# How many of the newest TrainingRun executions each pass checks for a recorded outcome.
RECENT_RUNS = 100
# One metric per resource acted on, named for what was done.
METRICS = {
    (Action.TERMINATE, BATCH_JOB): "BatchJobsTerminated",
    (Action.STOP, TRAINING_JOB): "TrainingJobsStopped",
    (Action.DELETE, FILE_SYSTEM): "FileSystemsDeleted",
    (Action.ARCHIVE, FILE_SYSTEM): "FileSystemsArchived",
    (Action.RETAIN, FILE_SYSTEM): "FileSystemsRetained",
}


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


def _tags(items: list[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or []}


def _from_ms(value: int | None) -> datetime | None:
    return datetime.fromtimestamp(value / 1000, UTC) if value else None


class Sweep:
    def __init__(self, settings: JanitorSettings, now: datetime) -> None:
        self.settings = settings
        self.now = now
        self.region = home_region()
        self.errors: list[str] = []
        self.executions: dict[str, dict[str, Any] | None] = {}  # None: gone

    def report(self, what: str, error: TrainGridError) -> None:
        self.errors.append(f"{what}: {error.message}")
        logger.error(f"janitor: {what} failed", extra={"error": error.message})
        metrics.add_metric(name="JanitorErrors", unit="Count", value=1)

    def attempt(self, what: str, call: Callable[[], Any], default: Any = None) -> Any:
        """Run one call; a failure is reported and the pass goes on."""
        try:
            return call()
        except TrainGridError as error:
            self.report(what, error)
            return default

    # --- what there is ----------------------------------------------------------------

    def database(self) -> str:
        return connection_url(self.settings)

    def regions(self) -> list[str]:
        """Where campaign jobs may train (the database's regions) and this region."""
        def read() -> list[str]:
            with transaction(self.database()) as session:
                return RegionRepository(session).codes()

        return sorted({self.region, *self.attempt("reading the campaign regions", read, [])})

    def ours(self, tags: dict[str, str]) -> bool:
        return owned_by(tags.get(EXECUTION_TAG), self.settings.state_machines)

    def file_systems(self) -> list[Resource]:
        found = self.attempt("listing file systems", fsx.list_file_systems, [])
        return [Resource(FILE_SYSTEM, fs["FileSystemId"], self.region, fs.get("Lifecycle", ""),
                         tags, arn=fs.get("ResourceARN", ""))
                for fs in found if self.ours(tags := _tags(fs.get("Tags")))]

    def batch_jobs(self) -> list[Resource]:
        queue = self.settings.training_job_queue
        summaries = [s for status in LIVE_BATCH_STATUSES for s in self.attempt(
            f"listing {status} jobs", lambda status=status: batch.list_jobs(queue, status), [])]
        jobs = self.attempt("describing jobs",
                            lambda: batch.describe_jobs([s["jobId"] for s in summaries]), [])
        return [Resource(BATCH_JOB, job["jobId"], self.region, job["status"], tags,
                         arn=job.get("jobArn", ""))
                for job in jobs if self.ours(tags := job.get("tags") or {})]

    def training_jobs(self, region: str) -> list[Resource]:
        found = []
        for status in LIVE_REGION_JOB_STATUSES:
            summaries = self.attempt(f"listing {status} training jobs in {region}",
                                     lambda status=status: sagemaker.list_training_jobs(
                                         region, status), [])
            for job in summaries:
                tags = self.attempt(f"reading the tags of {job['TrainingJobName']}",
                                    lambda job=job: sagemaker.tags_of(
                                        region, job["TrainingJobArn"]), {})
                if self.ours(tags):
                    found.append(Resource(TRAINING_JOB, job["TrainingJobName"], region, status,
                                          tags, arn=job["TrainingJobArn"]))
        return found

    def status(self, execution_arn: str) -> str | None:
        """The execution's status (``GONE`` if Step Functions does not know it); None when
        it could not be read (its resources are then left for the next pass)."""
        if execution_arn not in self.executions:
            try:
                self.executions[execution_arn] = stepfunctions.describe_execution(execution_arn)
            except ResourceNotFound:
                self.executions[execution_arn] = None
            except TrainGridError as error:
                self.report(f"describing {execution_arn}", error)
                return None
        described = self.executions[execution_arn]
        return GONE if described is None else described["status"]

    def with_outputs(self, fs: Resource) -> Resource:
        """A file system with what its run left: the run's jobs, its exports, its archive."""
        run, execution = fs.run, fs.execution_arn
        if not run:
            return fs
        queue = self.settings.training_job_queue
        named = batch.jobs_named(queue, run)
        jobs = [j for j in batch.describe_jobs([s["jobId"] for s in named])
                if (j.get("tags") or {}).get(EXECUTION_TAG, execution) == execution]
        exports = [Export(t["TaskId"], t["Lifecycle"], t["CreationTime"])
                   for t in fsx.exports_of(fs.id)]
        return Resource(
            fs.kind, fs.id, fs.region, fs.status, fs.tags, fs.arn,
            jobs=tuple(JobRun(j["jobId"], j["status"], "startedAt" in j,
                              _from_ms(j.get("stoppedAt"))) for j in jobs),
            exports=tuple(exports), archived=self.archived(run))

    def archived(self, run: str) -> bool:
        """Whether S3 holds the run's outputs: its manifest is there (the run verified its
        archive), or every file the job's output index lists is there at its size (the job
        exported them as it ended)."""
        bucket, prefix = self.settings.data_bucket, archive_prefix(run)
        objects = list(s3.objects_under(bucket, prefix))
        keys = {o["key"] for o in objects}
        if prefix + MANIFEST_NAME in keys:
            return True
        index = output_index(bucket, prefix, objects)
        return index is not None and not archive.missing_outputs(index, objects, prefix)

    # --- what to do, and doing it ------------------------------------------------------

    def act(self, decision: Decision) -> dict[str, Any] | None:
        """Carry out a releasing decision; what was done, or None if it failed."""
        resource, entry = decision.resource, decision.as_dict()
        if decision.action is Action.TERMINATE:
            batch.terminate_job(resource.id, f"TrainGrid janitor: {decision.reason}")
        elif decision.action is Action.STOP:
            entry["stopped"] = sagemaker.stop_training_job(resource.region, resource.id)
        elif decision.action is Action.DELETE:
            try:
                entry["lifecycle"] = fsx.delete_file_system(resource.id)
            except ResourceNotFound:
                entry["lifecycle"] = "DELETED"
        elif decision.action is Action.ARCHIVE:
            path = archive_prefix(resource.run or "").rstrip("/")
            entry["export_task_id"] = fsx.start_export(resource.id, [path])
            entry["archive"] = f"s3://{self.settings.data_bucket}/{path}/"
        elif decision.action is Action.RETAIN:
            fsx.tag_file_system(resource.arn, {RETAINED_TAG: RETAINED_BY_JANITOR,
                                               EXPIRES_TAG: decision.expires_at or ""})
        logger.info(f"janitor: {decision.action} {resource.kind} {resource.id}", extra=entry)
        metrics.add_metric(name=METRICS[(decision.action, resource.kind)], unit="Count",
                           value=1)
        return entry

    def record_outcomes(self, decisions: list[Decision]) -> list[dict[str, Any]]:
        """Campaign runs still RUNNING in the database whose execution has ended: SUCCEEDED if
        every region completed, else FAILED, saying how the execution ended and what the
        janitor released."""
        def running() -> list[str]:
            with transaction(self.database()) as session:
                return [run.execution_arn for run in RunRepository(session).running()]

        recorded = []
        for arn in self.attempt("reading the running campaign runs", running, []):
            status = self.status(arn)
            if status is None or status in RUNNING:
                continue
            cause, ended_at = self.outcome(arn, status, decisions)
            job_cause = f"the fan-out ended {status} before this region's job had an outcome"
            entry = self.attempt(f"recording the outcome of {arn}", functools.partial(
                self.close, arn, status, ended_at, cause, job_cause))
            if entry:
                logger.info("janitor: recorded a campaign run's outcome", extra=entry)
                recorded.append(entry)
        return recorded

    def record_training_runs(self, trigger: dict[str, Any],
                             decisions: list[Decision]) -> list[dict[str, Any]]:
        """TrainingRuns that ended without recording their outcome (stopped, timed out, or
        their record step failed): the execution that triggered this pass, those whose
        resources were found, and the newest ones of the state machine."""
        machine = self.settings.training_run_state_machine_arn
        prefix = stepfunctions.execution_arn(machine, "")
        arns = {arn for arn in [trigger.get("execution_arn"), *self.executions]
                if isinstance(arn, str) and arn.startswith(prefix)}
        newest = self.attempt("listing the newest training runs", lambda: stepfunctions.
                              list_executions(machine, RECENT_RUNS)[0], [])
        arns |= {e["executionArn"] for e in newest if e["status"] not in RUNNING}

        def unrecorded() -> list[str]:
            with transaction(self.database()) as session:
                return TrainingRunRepository(session).missing(sorted(arns))

        recorded = []
        for arn in self.attempt("reading the recorded training runs", unrecorded, []):
            status = self.status(arn)
            described = self.executions.get(arn)
            if status is None or described is None or status in RUNNING:
                continue
            cause = self.outcome(arn, status, decisions, "Start the run again.")[0]
            entry = self.attempt(f"recording the outcome of {arn}", functools.partial(
                self.record_training_run, from_execution(described, cause)))
            if entry:
                logger.info("janitor: recorded a training run's outcome",
                            extra={"training_run": entry})
                recorded.append(entry)
        return recorded

    def record_training_run(self, record: dict[str, Any]) -> dict[str, Any] | None:
        with transaction(self.database()) as session:
            row, written = TrainingRunRepository(session).record_if_absent(record)
            return as_dict(row) if written else None

    def close(self, arn: str, status: str, ended_at: datetime, cause: str,
              job_cause: str) -> dict[str, Any]:
        with transaction(self.database()) as session:
            run = RunRepository(session).close(arn, ended_at, cause, job_cause)
            return {"execution_arn": arn, "execution_status": status, "status": run.status,
                    "cause": run.failure_cause}

    def outcome(self, arn: str, status: str, decisions: list[Decision],
                again: str = "Start the fan-out again to train on this data."
                ) -> tuple[str, datetime]:
        described = self.executions.get(arn) or {}
        ended_at = described.get("stopDate") or self.now
        how = f"The execution ended {status}" if status != GONE else "The execution is gone"
        if described.get("error"):
            how += f" ({described['error']}: {described.get('cause') or 'no cause given'})"
        released = [f"{d.action} {d.resource.kind} {d.resource.id} ({d.resource.region})"
                    for d in decisions
                    if d.resource.execution_arn == arn and d.action in RELEASING]
        what = ("the janitor released what it left: " + "; ".join(released) if released
                else "nothing of it was left running")
        return f"{how} before recording its outcome; {what}. {again}", ended_at


def sweep(event: dict[str, Any], settings: JanitorSettings) -> dict[str, Any]:
    trigger = trigger_of(event)
    now = clock.now()
    janitor = Sweep(settings, now)
    regions = janitor.regions()
    found = janitor.file_systems() + janitor.batch_jobs()
    for region in regions:
        found += janitor.training_jobs(region)
    statuses = {arn: status for arn in {r.execution_arn for r in found if r.execution_arn}
                if (status := janitor.status(arn)) is not None}
    resources = [janitor.attempt(f"reading what {r.id} holds", lambda r=r: janitor.with_outputs(r))
                 if r.kind == FILE_SYSTEM and statuses.get(r.execution_arn or "") not in (
                     None, *RUNNING) else r for r in found]
    # A file system whose contents could not be read stays, for the next pass.
    decisions = decide([r for r in resources if r is not None], statuses, now,
                       timedelta(days=settings.retention_days), settings.state_machines)
    released = [entry for d in decisions if d.action in RELEASING
                if (entry := janitor.attempt(f"{d.action} {d.resource.kind} {d.resource.id}",
                                             lambda d=d: janitor.act(d)))]
    outcome = {
        "trigger": trigger, "swept_at": clock.iso(now), "regions": regions,
        "released": released,
        "waiting": [d.as_dict() for d in decisions if d.action is Action.WAIT],
        "pending": sum(d.action in PENDING for d in decisions),
        "kept": sum(d.action is Action.KEEP for d in decisions),
        "runs_recorded": janitor.record_outcomes(decisions),
        "training_runs_recorded": janitor.record_training_runs(trigger, decisions),
        "errors": janitor.errors,
    }
    logger.info("janitor pass", extra={k: v for k, v in outcome.items() if k != "released"}
                | {"released": len(released)})
    # Every pass counts, so an alarm can tell when the janitor stops running.
    metrics.add_metric(name="JanitorPasses", unit="Count", value=1)
    return outcome

