"""The TrainingRun state machine's Lambda steps between Plan (``plan_step``) and the manifest
(``manifest``): read from AWS, decide with pure domain code, act. Handlers call exactly one of
these."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from traingrid import clock
from traingrid.aws import fsx
from traingrid.training import waits
from traingrid.training.state import (
    CheckExportEvent,
    CheckFileSystemEvent,
    ExportState,
    FileSystemState,
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
