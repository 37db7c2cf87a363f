"""A TrainingRun's outcome as the campaign database keeps it (``training_runs``).

The run's last step records it from the execution's state (:func:`from_state`). A run that ended
without getting there — stopped, timed out, or its record failed — is recorded by the janitor
from what Step Functions says about the execution (:func:`from_execution`). Both give the same
fields; what the run did not get to is None.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from traingrid.vocabulary.statuses import (
    ENDED_RUN_STATUSES,
    SELF_RECORDED_RUN_STATUSES,
    RunStatus,
)
from traingrid.vocabulary.training_run import RecordedRun

# Bounds of the columns: a value that does not fit is cut, never refused (the run is over).
LIMITS = {"name": 80, "instance_type": 64, "job_id": 64, "job_status": 16,
          "file_system_id": 32, "retained_file_system": 32, "error": 128,
          "artifacts": 2048, "manifest": 2048}
INT_MAX = 2**31 - 1


def run_name(execution_arn: str) -> str:
    return execution_arn.rsplit(":", 1)[-1]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any, maximum: int = INT_MAX) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        return None
    return value


def _money(value: Any) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return None
    return amount if amount.is_finite() and 0 <= amount < 10**6 else None


def _attempts(value: Any) -> list[dict[str, Any]] | None:
    """The run's attempts as recorded: a list of objects, else nothing."""
    if not isinstance(value, list) or not all(isinstance(a, dict) for a in value):
        return None
    return value


def nodes_used(planned_job: dict[str, Any], job: dict[str, Any]) -> int | None:
    """The nodes of the last attempt, if it (or, as recorded, an earlier one) got nodes."""
    if not (job.get("started") or planned_job.get("trained")):
        return None
    ran = [a for a in _attempts(planned_job.get("attempts")) or [] if a.get("ran_s")]
    if job.get("started") or not ran:
        return _int(planned_job.get("nodes"))
    return _int(ran[-1].get("nodes"))


def _fitted(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value[:LIMITS[key]] if key in LIMITS and isinstance(value, str) else value
            for key, value in record.items()}


def from_state(state: Mapping[str, Any], status: str, execution_arn: str,
               started_at: datetime, ended_at: datetime) -> dict[str, Any]:
    """The outcome the run's own state holds as it ends ``status`` (SUCCEEDED or FAILED)."""
    if status not in SELF_RECORDED_RUN_STATUSES:
        raise ValueError(f"a run records itself SUCCEEDED or FAILED, not {status!r}")
    plan, job = _dict(state.get("plan")), _dict(state.get("job"))
    planned_job, estimate = _dict(plan.get("job")), _dict(plan.get("estimate"))
    archive, retained = _dict(state.get("archive")), _dict(state.get("retained"))
    file_system, explained = _dict(state.get("file_system")), _dict(state.get("explained"))
    dataset = _text(_dict(plan.get("dataset")).get("uri")) or _text(
        _dict(state.get("request")).get("dataset"))
    manifest = _text(archive.get("manifest")) if archive.get("complete") else None
    planned_archive = _dict(plan.get("archive"))
    artifacts = None
    if manifest and _text(planned_archive.get("bucket")):
        artifacts = f"s3://{planned_archive['bucket']}/{planned_archive.get('prefix', '')}"
    elif retained:
        artifacts = _text(retained.get("where"))
    return _fitted({
        "execution_arn": execution_arn,
        "name": _text(plan.get("run")) or run_name(execution_arn),
        "status": status,
        "started_at": started_at,
        "ended_at": ended_at,
        "dataset": dataset,
        "nodes": _int(planned_job.get("requested_nodes")) or _int(planned_job.get("nodes")),
        "instance_type": _text(planned_job.get("instance_type")),
        "mpi_gpus": _int(planned_job.get("mpi_gpus")),
        "estimated_max_usd": _money(estimate.get("max_usd")),
        "nodes_used": nodes_used(planned_job, job),
        "attempts": _attempts(planned_job.get("attempts")),
        "job_id": _text(job.get("id")),
        "job_status": _text(job.get("status")),
        "training_s": _int(job.get("running_s")),
        "file_system_id": _text(file_system.get("id")),
        "artifacts": artifacts,
        "manifest": manifest,
        "archived_objects": _int(archive.get("objects")) if manifest else None,
        "archived_bytes": _int(archive.get("bytes"), 2**63 - 1) if manifest else None,
        "retained_file_system": _text(retained.get("file_system_id")),
        "error": _text(explained.get("error")) if status == RunStatus.FAILED else None,
        "failure_cause": _text(explained.get("cause")) if status == RunStatus.FAILED else None,
        "recorded_by": "run",
    })


def _json(text: Any) -> dict[str, Any]:
    try:
        return _dict(json.loads(text)) if isinstance(text, str) else {}
    except ValueError:
        return {}


def from_execution(described: dict[str, Any], cause: str | None = None) -> dict[str, Any]:
    """The outcome of an ended execution, from DescribeExecution: its input's request, a
    succeeded run's output (its summary), the error and cause it ended with, or ``cause``
    (what the janitor found and did) when it ended without one."""
    status = described["status"]
    if status not in ENDED_RUN_STATUSES:
        raise ValueError(f"execution {described.get('executionArn')} has not ended: {status}")
    request = _dict(_json(described.get("input")).get("request"))
    summary = _json(described.get("output")) if status == RunStatus.SUCCEEDED else {}
    manifest = _text(summary.get("manifest"))
    arn = described["executionArn"]
    failed = status != RunStatus.SUCCEEDED
    return _fitted({
        "execution_arn": arn,
        "name": _text(described.get("name")) or run_name(arn),
        "status": status,
        "started_at": described["startDate"],
        "ended_at": described.get("stopDate") or described["startDate"],
        "dataset": _text(summary.get("dataset")) or _text(request.get("dataset")),
        "nodes": _int(summary.get("nodes_requested")) or _int(request.get("nodes")),
        "instance_type": _text(summary.get("instance_type")),
        "mpi_gpus": _int(summary.get("mpi_gpus")),
        "estimated_max_usd": _money(_dict(summary.get("estimate")).get("max_usd")),
        "nodes_used": _int(summary.get("nodes")),
        "attempts": _attempts(summary.get("attempts")),
        "job_id": _text(summary.get("job_id")),
        "job_status": _text(summary.get("job_status")),
        "training_s": _int(summary.get("training_s")),
        "file_system_id": _text(summary.get("file_system_id")),
        "artifacts": manifest.rsplit("/", 1)[0] + "/" if manifest else None,
        "manifest": manifest,
        "archived_objects": _int(summary.get("objects")) if manifest else None,
        "archived_bytes": _int(summary.get("bytes"), 2**63 - 1) if manifest else None,
        "retained_file_system": None,
        "error": (_text(described.get("error")) or status) if failed else None,
        "failure_cause": (_text(described.get("cause")) or cause) if failed else None,
        "recorded_by": "janitor",
    })


def as_dict(record: Any) -> RecordedRun:
    """A stored record as JSON-ready values (what the record step returns)."""
    return {
        "execution_arn": record.execution_arn, "name": record.name, "status": record.status,
        "recorded_by": record.recorded_by, "artifacts": record.artifacts,
        "error": record.error,
    }
