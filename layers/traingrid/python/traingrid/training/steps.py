"""The TrainingRun state machine's Lambda steps between Plan (``plan_step``) and the manifest
(``manifest``): read from AWS, decide with pure domain code, act. Handlers call exactly one of
these."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from traingrid import clock
from traingrid.aws import fsx, s3
from traingrid.errors import AwsServiceError, ResourceNotFound
from traingrid.training import attempts, waits
from traingrid.training.archive import file_system_path, outputs_of
from traingrid.training.plan import FSX_MOUNT_POINT
from traingrid.vocabulary.training_run import (
    CheckExportEvent,
    CheckFileSystemEvent,
    ExportState,
    FileSystemState,
    NextAttemptEvent,
    PlanJob,
    Retained,
    RetainFileSystemEvent,
    RunPlan,
)

if TYPE_CHECKING:
    from traingrid.settings import Settings

def check_file_system(event: CheckFileSystemEvent) -> FileSystemState:
    state = event["file_system"]
    result = waits.check_file_system(
        fsx.describe_file_system(state["id"]), waits.Poll.of(state.get("poll")),
        int(event["limit_s"]),
    )
    checked: FileSystemState = {"arn": state.get("arn", ""), **result}
    return checked


def next_attempt(event: NextAttemptEvent) -> PlanJob:
    """The job failed: another attempt or not (``attempts.next_attempt``), with the newest
    checkpoint that reached S3 as the one a resubmitted job resumes from."""
    archive = event["archive"]
    prefix = f"{outputs_of(archive)}{attempts.CHECKPOINT_DIR}/"
    keys = [o["key"] for o in s3.objects_under(archive["bucket"], prefix)]
    newest = attempts.newest_checkpoint(keys, prefix)
    checkpoint = f"{FSX_MOUNT_POINT}/{file_system_path(archive, newest)}" if newest else None
    job = event["job"]
    if job.get("exit_code") == attempts.EXIT_PREFLIGHT:
        job = {**job, "preflight": preflight_cause(archive["bucket"], outputs_of(archive))}
    return attempts.next_attempt(event["plan_job"], job, checkpoint)


def preflight_cause(bucket: str, outputs: str) -> str | None:
    """The pre-flight check's verdict the job exported to S3 on its way out, if it got there."""
    try:
        document = s3.get_json(bucket, f"{outputs}{attempts.PREFLIGHT_FILE}").document
    except (ResourceNotFound, AwsServiceError, ValueError):
        return None  # the attempt's reason then names the exit code alone
    cause = document.get("cause") if isinstance(document, dict) else None
    return cause[:1000] if isinstance(cause, str) else None


def artifacts_location(plan: RunPlan, file_system: FileSystemState) -> str:
    archive = plan["archive"]
    return (
        f"the outputs are on FSx file system {file_system['id']} under "
        f"/{archive['file_system_path']} (mount {file_system.get('dns_name', '?')}@tcp:/"
        f"{file_system.get('mount_name', '?')}); partial copies may be in "
        f"s3://{archive['bucket']}/{archive['prefix']}"
    )


def check_export(event: CheckExportEvent) -> ExportState:
    state, plan = event["export"], event["plan"]
    return waits.check_export(
        fsx.describe_export_task(state["id"]), waits.Poll.of(state.get("poll")),
        int(plan["limits"]["archive_s"]), clock.now().timestamp(),
    )


def retain_file_system(event: RetainFileSystemEvent, settings: Settings) -> Retained:
    """Keep the file system whose archive failed: tag its new expiry, say where the data is."""
    file_system, plan = event["file_system"], event["plan"]
    expires_at = clock.iso(clock.now() + timedelta(days=settings.retention_days))
    fsx.tag_file_system(file_system["arn"], {
        "traingrid:expires-at": expires_at, "traingrid:retained": "archive-failed",
    })
    return Retained(file_system_id=file_system["id"], expires_at=expires_at,
                    where=artifacts_location(plan, file_system))
