"""Start a TrainingRun from a manifest uploaded to the data bucket.

``<prefix>/manifest.json`` asks for a run over ``<prefix>/``; its JSON holds the request's
fields (all optional but none unknown). The execution is named from the object, so S3's
at-least-once delivery never starts a run twice.
"""

from __future__ import annotations

from typing import Any

from traingrid.aws import s3, stepfunctions
from traingrid.errors import RequestInvalid, ResourceNotFound
from traingrid.naming import prefix_of, run_name_for_object
from traingrid.observability import logger, metrics
from traingrid.settings import TriggerSettings
from traingrid.training.plan import ARCHIVE_ROOT, MANIFEST_NAME
from traingrid.training.run_request import (
    TrainingRunRequest,
    parse_request,
    require_runnable_here,
)
from traingrid.validation import parse


def request_from_manifest(manifest: Any, bucket: str, key: str) -> TrainingRunRequest:
    """The request a manifest asks for. Anyone who may write to the data bucket can upload
    one, so it never chooses the command (``command_problems``)."""
    source = f"manifest s3://{bucket}/{key}"
    if not isinstance(manifest, dict):
        return parse(TrainingRunRequest, manifest, source)  # raises with the reason
    defaults = {"dataset": f"s3://{bucket}/{prefix_of(key)}"}
    return parse_request(defaults | manifest, source, commands=False, sent_as="A manifest")


def read_manifest(bucket: str, key: str, version_id: str | None = None) -> s3.JsonObject:
    source = f"manifest s3://{bucket}/{key}"
    try:
        if version_id:
            return s3.get_json_version(bucket, key, version_id)
        return s3.get_json(bucket, key)
    except ValueError as error:
        raise RequestInvalid([{"pointer": "", "message": f"not a JSON document: {error}"}],
                             source) from None
    except ResourceNotFound:
        # Deleted (or overwritten, for a version) between the upload and this event.
        raise RequestInvalid([{"pointer": "", "message": "it no longer exists; upload it "
                               "again to start a run"}], source) from None


def start_from_upload(
    bucket: str, key: str, etag: str, settings: TriggerSettings, version_id: str | None = None,
) -> dict[str, Any]:
    """Start (or find) the run an uploaded manifest asks for; reject it with every reason.

    The manifest is read as the version the event names (when the bucket keeps versions), so
    a redelivered event reads what was uploaded then, and its run is named from it.
    """
    if key.startswith(f"{ARCHIVE_ROOT}/") or key.rpartition("/")[2] != MANIFEST_NAME:
        # Nothing under runs/ is a request: runs/<run>/manifest.json is an archive's own
        # manifest, and whatever else is there came from a run (its job's exports).
        logger.info("upload ignored: not a run request", extra={"bucket": bucket, "key": key})
        metrics.add_metric(name="UploadIgnored", unit="Count", value=1)
        return {"status": "ignored", "key": key}
    try:
        manifest = read_manifest(bucket, key, version_id)
        request = request_from_manifest(manifest.document, bucket, key)
        require_runnable_here(request, settings.data_bucket, settings.allowed_instance_types,
                              settings.node_shared_memory_mib,
                              launches_p3_and_g3=settings.launches_p3_and_g3)
    except RequestInvalid as invalid:
        logger.warning("manifest rejected; nothing started", extra={
            "bucket": bucket, "key": key, "problems": invalid.problems})
        metrics.add_metric(name="ManifestRejected", unit="Count", value=1)
        return {"status": "rejected", "key": key, "reason": invalid.message,
                "problems": invalid.problems}
    name = request.name or run_name_for_object(bucket, key, etag, manifest.last_modified)
    execution = stepfunctions.start_named_execution(
        settings.training_run_state_machine_arn,
        name,
        {
            "request": request.model_dump(mode="json", exclude_none=True),
            "trigger": {"source": "s3", "bucket": bucket, "key": key, "etag": etag},
        },
    )
    status = "started" if execution["started"] else "duplicate"
    logger.info(f"run {name} {status}", extra={"execution_arn": execution["execution_arn"]})
    metrics.add_metric(name="RunStarted" if execution["started"] else "DuplicateTrigger",
                       unit="Count", value=1)
    return {"status": status, "name": name, "execution_arn": execution["execution_arn"]}
