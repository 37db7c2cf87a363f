"""The TrainingRun state machine's Lambda steps: read from AWS, decide with pure domain code,
act. Handlers call exactly one of these."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from traingrid import clock
from traingrid.aws import fsx, s3
from traingrid.errors import ArchiveIncomplete, DatasetNotFound
from traingrid.settings import Settings
from traingrid.training import archive, polling
from traingrid.training.plan import MANIFEST_NAME, DatasetSize, plan_run
from traingrid.training.request import TrainingRunRequest, require_data_bucket
from traingrid.validation import parse

INDEX_MAX_BYTES = 8 * 1024 * 1024  # a job's output index: ~100 bytes a file


def measure_dataset(bucket: str, prefix: str) -> DatasetSize:
    objects = total = 0
    for item in s3.objects_under(bucket, prefix):
        objects += 1
        total += item["size"]
    if not objects:
        raise DatasetNotFound(
            f"No objects under s3://{bucket}/{prefix}: upload the dataset there first."
        )
    return DatasetSize(objects, total)


def plan(event: dict[str, Any], settings: Settings) -> dict[str, Any]:
    request = parse(TrainingRunRequest, event.get("request"))
    require_data_bucket(request, settings.data_bucket)
    return plan_run(
        request,
        run=event["run"],
        execution_arn=event["execution_arn"],
        dataset=measure_dataset(request.bucket, request.prefix),
        now=clock.now(),
    )


def check_file_system(event: dict[str, Any]) -> dict[str, Any]:
    state = event["file_system"]
    result = polling.check_file_system(
        fsx.describe_file_system(state["id"]), polling.Poll.of(state.get("poll")),
        int(event["limit_s"]),
    )
    return {"arn": state.get("arn", "")} | result


def artifacts_location(plan: dict[str, Any], file_system: dict[str, Any]) -> str:
    archive = plan["archive"]
    return (
        f"the outputs are on FSx file system {file_system['id']} under "
        f"/{archive['file_system_path']} (mount {file_system.get('dns_name', '?')}@tcp:/"
        f"{file_system.get('mount_name', '?')}); partial copies may be in "
        f"s3://{archive['bucket']}/{archive['prefix']}"
    )


def check_export(event: dict[str, Any]) -> dict[str, Any]:
    state, plan = event["export"], event["plan"]
    return polling.check_export(
        fsx.describe_export_task(state["id"]), polling.Poll.of(state.get("poll")),
        int(plan["limits"]["archive_s"]), clock.now().timestamp(),
    )


def write_manifest(event: dict[str, Any]) -> dict[str, Any]:
    """Verify the archive in S3 against the job's output index and write the manifest of
    every archived object.

    Before any export task (no ``export`` in the event) an incomplete archive is an answer,
    ``complete: false``, and the export task copies the rest; after one, it is an error and
    nothing is deleted."""
    plan, export, job = event["plan"], event.get("export"), event["job"]
    bucket, prefix = plan["archive"]["bucket"], plan["archive"]["prefix"]
    manifest_key = prefix + MANIFEST_NAME
    objects = [o for o in s3.objects_under(bucket, prefix) if o["key"] != manifest_key]
    index = _output_index(bucket, prefix, objects)
    missing = archive.missing_outputs(index, objects, prefix) if index else []
    if export is None and (index is None or missing):
        return {"complete": False, "indexed": len(index.files) if index else None,
                "missing": len(missing)}
    if missing:
        raise ArchiveIncomplete(
            f"{len(missing)} of the job's {len(index.files) if index else 0} output file(s) are "
            f"not in s3://{bucket}/{prefix} after the export (for example {missing[0]}). "
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
    return {"complete": True, "archived_by": archived_by, "manifest": uri,
            "objects": len(objects), "bytes": total}


def _output_index(bucket: str, prefix: str, objects: list[dict[str, Any]]
                  ) -> archive.OutputIndex | None:
    key = prefix + archive.OUTPUT_INDEX
    if not any(o["key"] == key for o in objects):
        return None
    try:
        document = s3.get_json(bucket, key, max_bytes=INDEX_MAX_BYTES).document
    except ValueError:
        return None
    return archive.parse_index(document)


def retain_file_system(event: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Keep the file system whose archive failed: tag its new expiry, say where the data is."""
    file_system, plan = event["file_system"], event["plan"]
    expires_at = clock.iso(clock.now() + timedelta(days=settings.retention_days))
    fsx.tag_file_system(file_system["arn"], {
        "traingrid:expires-at": expires_at, "traingrid:retained": "archive-failed",
    })
    return {
        "file_system_id": file_system["id"],
        "expires_at": expires_at,
        "where": artifacts_location(plan, file_system),
    }
