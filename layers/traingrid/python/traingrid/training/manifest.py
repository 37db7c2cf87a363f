"""Verify a run's archive in S3 against the job's output index, and write its manifest: before
any export task (CheckArchive) and after one (WriteManifest), a function each.

``check_archive`` takes CheckArchiveEvent, ``write_manifest`` WriteManifestEvent; both return
ArchiveState, TypedDicts checked by mypy: their input is the state machine's own state, so
nothing is parsed at run time (the output index, which the job wrote, is:
``archive.parse_index``)."""

from __future__ import annotations

from typing import Any

from traingrid import clock
from traingrid.aws import s3
from traingrid.errors import ArchiveIncomplete, TrainGridError
from traingrid.observability import logger
from traingrid.training import archive, recoveries
from traingrid.training.plan import MANIFEST_NAME
from traingrid.vocabulary.training_run import (
    ArchiveState,
    CheckArchiveEvent,
    ExportState,
    RunPlan,
    TrainingJobState,
    WriteManifestEvent,
)

INDEX_MAX_BYTES = 8 * 1024 * 1024  # a job's output index: ~100 bytes a file


def check_archive(event: CheckArchiveEvent) -> ArchiveState:
    """CheckArchive, before any export task: the job exported its outputs as it ended; if S3
    holds every file of its output index, write the manifest (``complete: true``), else answer
    ``complete: false`` and the export task copies the rest."""
    return _verified(event, None)


def write_manifest(event: WriteManifestEvent) -> ArchiveState:
    """WriteManifest, after the export task: write the manifest, or raise ArchiveIncomplete
    (nothing is deleted) when S3 still lacks a file of the job's output index."""
    return _verified(event, event["export"])


def _verified(event: CheckArchiveEvent, export: ExportState | None) -> ArchiveState:
    """Verify the archive in S3 against the job's output index and write the manifest of
    every archived object; before an export task (``export`` None) an incomplete archive is
    an answer, after one an error."""
    plan, job = event["plan"], event["job"]
    bucket, prefix = plan["archive"]["bucket"], plan["archive"]["prefix"]
    outputs = archive.outputs_of(plan["archive"])
    manifest_key = prefix + MANIFEST_NAME
    # Everything the file system exported (its export root is the run's prefix).
    objects = [o for o in s3.objects_under(bucket, prefix) if o["key"] != manifest_key]
    index = output_index(bucket, outputs, objects)
    missing = archive.missing_outputs(index, objects, outputs) if index else []
    if export is None and (index is None or missing):
        return {"complete": False, "indexed": len(index.files) if index else None,
                "missing": len(missing)}
    if missing:
        raise ArchiveIncomplete(
            f"{len(missing)} of the job's {len(index.files) if index else 0} output file(s) are "
            f"not in s3://{bucket}/{outputs} after the export (for example {missing[0]}). "
            "Nothing was deleted"
        )
    exported = int(export.get("exported", 0)) if export else 0
    if exported and not objects:
        raise ArchiveIncomplete(
            f"The export reported {exported} file(s) but s3://{bucket}/{prefix} is empty. "
            "Nothing was deleted"
        )
    total = sum(o["size"] for o in objects)
    archived_by = "export task" if export else "training job"
    reported = reported_phases(bucket, outputs, objects, attempt_bounds(plan, job))
    uri = s3.write_json(bucket, manifest_key, {
        "run": plan["run"],
        "dataset": plan["dataset"]["uri"],
        "job": {"id": job["id"], "status": job["status"]},
        "file_system_id": event["file_system"]["id"],
        "archived_by": archived_by,
        "export_task_id": export["id"] if export else None,
        "archived_at": clock.iso(clock.now()),
        "object_count": len(objects),
        "total_bytes": total,
        "objects": objects,
    })
    state: ArchiveState = {"complete": True, "archived_by": archived_by, "manifest": uri,
                           "objects": len(objects), "bytes": total}
    if reported.phases:
        state["phases"] = reported.phases
    if reported.ignored:
        state["ignored"] = reported.ignored
    return state


def attempt_bounds(plan: RunPlan, job: TrainingJobState) -> recoveries.Bounds:
    """What the attempt that wrote the outputs had: its nodes, and how long it ran (Batch's
    timestamps; its time limit where they are not known)."""
    ran = job.get("running_s")
    seconds = ran if isinstance(ran, int) and ran > 0 else plan["job"]["attempt_duration_s"]
    return recoveries.Bounds(nodes=plan["job"]["nodes"], seconds=seconds)


def reported_phases(bucket: str, prefix: str, objects: list[dict[str, Any]],
                    bounds: recoveries.Bounds) -> recoveries.Reported:
    """The node-seconds by cause the job's metrics.json reports (``training.recoveries``)
    and what of it was left out. The job wrote it: whatever it holds, the goodput's figures
    never stop the archive, so a file that cannot be read is a note, never an error."""
    key = prefix + recoveries.METRICS_FILE
    if not any(o["key"] == key for o in objects):
        return recoveries.Reported()
    try:
        document = s3.get_json(bucket, key, max_bytes=recoveries.METRICS_MAX_BYTES).document
        reported = recoveries.read(document, bounds)
    except (ValueError, TrainGridError) as error:
        note = f"metrics.json was not read: {error}"
    except Exception as error:  # noqa: BLE001 - a bug in reading it must not fail the run
        logger.exception("the job's metrics.json was not read")
        note = f"metrics.json was not read ({type(error).__name__}; the function's log has why)"
    else:
        if reported.ignored:
            logger.warning("values of the job's metrics.json left out",
                           extra={"ignored": reported.ignored})
        return reported
    logger.warning("the job's recoveries were not read", extra={"error": note})
    return recoveries.Reported(ignored=recoveries.bounded([note]))


def output_index(bucket: str, prefix: str, objects: list[dict[str, Any]]
                 ) -> archive.OutputIndex | None:
    """The job's output index among ``objects`` (a listing that covers ``prefix``, the job's
    outputs), or None when there is none or it is not one."""
    key = prefix + archive.OUTPUT_INDEX
    if not any(o["key"] == key for o in objects):
        return None
    try:
        document = s3.get_json(bucket, key, max_bytes=INDEX_MAX_BYTES).document
    except ValueError:
        return None
    return archive.parse_index(document)
