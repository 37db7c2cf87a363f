"""What the janitor finds: TrainGrid's file systems, Batch jobs and SageMaker training jobs,
the executions they belong to, and what a file system's run left in S3.

Executions are described once per pass and kept (``Inventory.executions``) for the records
the pass may write.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from traingrid import db
from traingrid.aws import batch, fsx, s3, sagemaker, stepfunctions
from traingrid.aws.clients import home_region
from traingrid.aws.secrets import connection_url
from traingrid.errors import ResourceNotFound, TrainGridError
from traingrid.janitor.calls import Attempts
from traingrid.janitor.decide import (
    BATCH_JOB,
    EXECUTION_TAG,
    FILE_SYSTEM,
    GONE,
    LIVE_BATCH_STATUSES,
    TRAINING_JOB,
    Export,
    JobRun,
    Resource,
    owned_by,
)
from traingrid.settings import JanitorSettings
from traingrid.training import archive
from traingrid.training.manifest import output_index
from traingrid.training.plan import MANIFEST_NAME, archive_prefix, outputs_prefix
from traingrid.vocabulary.campaign_fanout import LIVE_REGION_JOB_STATUSES


def _tags(items: list[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or []}


def _from_ms(value: int | None) -> datetime | None:
    return datetime.fromtimestamp(value / 1000, UTC) if value else None


class Inventory:
    def __init__(self, settings: JanitorSettings, attempts: Attempts) -> None:
        self.settings = settings
        self.attempts = attempts
        self.region = home_region()
        self.executions: dict[str, dict[str, Any] | None] = {}  # None: gone

    def database(self) -> str:
        return connection_url(self.settings)

    def regions(self) -> list[str]:
        """Where campaign jobs may train (the database's regions) and this region."""
        def read() -> list[str]:
            with db.transaction(self.database()) as session:
                return db.RegionRepository(session).codes()

        codes = self.attempts.attempt("reading the campaign regions", read, [])
        return sorted({self.region, *codes})

    def ours(self, tags: dict[str, str]) -> bool:
        return owned_by(tags.get(EXECUTION_TAG), self.settings.state_machines)

    def resources(self, regions: list[str]) -> list[Resource]:
        found = self.file_systems() + self.batch_jobs()
        for region in regions:
            found += self.training_jobs(region)
        return found

    def file_systems(self) -> list[Resource]:
        found = self.attempts.attempt("listing file systems", fsx.list_file_systems, [])
        return [Resource(FILE_SYSTEM, fs["FileSystemId"], self.region, fs.get("Lifecycle", ""),
                         tags, arn=fs.get("ResourceARN", ""))
                for fs in found if self.ours(tags := _tags(fs.get("Tags")))]

    def batch_jobs(self) -> list[Resource]:
        queue = self.settings.training_job_queue

        def listed(status: str) -> list[dict[str, Any]]:
            return self.attempts.attempt(f"listing {status} jobs",
                                         lambda: batch.list_jobs(queue, status), [])

        summaries = [s for status in LIVE_BATCH_STATUSES for s in listed(status)]
        jobs = self.attempts.attempt(
            "describing jobs", lambda: batch.describe_jobs([s["jobId"] for s in summaries]), [])
        return [Resource(BATCH_JOB, job["jobId"], self.region, job["status"], tags,
                         arn=job.get("jobArn", ""))
                for job in jobs if self.ours(tags := job.get("tags") or {})]

    def training_jobs(self, region: str) -> list[Resource]:
        def listed(status: str) -> list[dict[str, Any]]:
            return self.attempts.attempt(f"listing {status} training jobs in {region}",
                                         lambda: sagemaker.list_training_jobs(region, status),
                                         [])

        def tags_of(job: dict[str, Any]) -> dict[str, str]:
            return self.attempts.attempt(
                f"reading the tags of {job['TrainingJobName']}",
                lambda: sagemaker.tags_of(region, job["TrainingJobArn"]), {})

        return [Resource(TRAINING_JOB, job["TrainingJobName"], region, status, tags,
                         arn=job["TrainingJobArn"])
                for status in LIVE_REGION_JOB_STATUSES for job in listed(status)
                if self.ours(tags := tags_of(job))]

    def status(self, execution_arn: str) -> str | None:
        """The execution's status (``GONE`` if Step Functions does not know it); None when
        it could not be read (its resources are then left for the next pass)."""
        if execution_arn not in self.executions:
            try:
                self.executions[execution_arn] = stepfunctions.describe_execution(execution_arn)
            except ResourceNotFound:
                self.executions[execution_arn] = None
            except TrainGridError as error:
                self.attempts.report(f"describing {execution_arn}", error)
                return None
        described = self.executions[execution_arn]
        return GONE if described is None else str(described["status"])

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
        outputs = outputs_prefix(run)
        objects = list(s3.objects_under(bucket, prefix))
        keys = {o["key"] for o in objects}
        if prefix + MANIFEST_NAME in keys:
            return True
        index = output_index(bucket, outputs, objects)
        return index is not None and not archive.missing_outputs(index, objects, outputs)
