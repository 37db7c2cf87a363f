"""The janitor's actions on what an ended execution left: terminate a Batch job, stop a
SageMaker job, delete, archive or keep a file system. Each is a log line and a metric."""

from __future__ import annotations

from typing import Any

from traingrid.aws import batch, fsx, sagemaker
from traingrid.errors import ResourceNotFound
from traingrid.janitor.decide import (
    BATCH_JOB,
    EXPIRES_TAG,
    FILE_SYSTEM,
    RETAINED_BY_JANITOR,
    RETAINED_TAG,
    TRAINING_JOB,
    Action,
    Decision,
)
from traingrid.observability import logger, metrics
from traingrid.training.plan import OUTPUTS_DIR, outputs_prefix

# One metric per resource acted on, named for what was done.
METRICS = {
    (Action.TERMINATE, BATCH_JOB): "BatchJobsTerminated",
    (Action.STOP, TRAINING_JOB): "TrainingJobsStopped",
    (Action.DELETE, FILE_SYSTEM): "FileSystemsDeleted",
    (Action.ARCHIVE, FILE_SYSTEM): "FileSystemsArchived",
    (Action.RETAIN, FILE_SYSTEM): "FileSystemsRetained",
}


def act(decision: Decision, data_bucket: str) -> dict[str, Any]:
    """Carry out a releasing decision; what was done."""
    resource = decision.resource
    entry: dict[str, Any] = dict(decision.as_dict())
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
        # The job's outputs folder, exported below the run's prefix (the file system's
        # export root).
        entry["export_task_id"] = fsx.start_export(resource.id, [OUTPUTS_DIR])
        entry["archive"] = f"s3://{data_bucket}/{outputs_prefix(resource.run or '')}"
    elif decision.action is Action.RETAIN:
        fsx.tag_file_system(resource.arn, {RETAINED_TAG: RETAINED_BY_JANITOR,
                                           EXPIRES_TAG: decision.expires_at or ""})
    logger.info(f"janitor: {decision.action} {resource.kind} {resource.id}", extra=entry)
    metrics.add_metric(name=METRICS[(decision.action, resource.kind)], unit="Count", value=1)
    return entry
