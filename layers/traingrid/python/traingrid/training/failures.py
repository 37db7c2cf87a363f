"""One readable error and cause for every way a TrainingRun can end badly.

The state machine records what went wrong under a few keys (``failure`` for the step that
failed, ``archive_failure``, ``release_failure`` …) and sends its whole state here; the result
goes straight into the Fail state, so the console shows what happened and what to do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from traingrid.errors import (
    AwsServiceError,
    FileSystemNotDeleted,
    ResourceNotFound,
    UnknownFailure,
)
from traingrid.training.attempts import attempts_summary
from traingrid.vocabulary.catalog import fsx_storage_quota
from traingrid.vocabulary.training_run import Explained

# Step Functions caps a Fail state's cause at 32,768 characters.
MAX_CAUSE = 32_000
THROTTLING_CODES = ("ThrottlingException", "TooManyRequestsException", "Throttling",
                    "SlowDown", "RequestLimitExceeded")
TIMEOUTS = ("Sandbox.Timedout", "States.Timeout", "Workflow.Timeout")
SERVICES = ("FSx", "Batch", "SageMaker", "S3", "Lambda", "DynamoDB", "StepFunctions")
# TrainGrid's own names for an AWS call that failed.
AWS_ERRORS = (AwsServiceError.__name__, ResourceNotFound.__name__)


def readable(failure: Mapping[str, Any]) -> tuple[str, str]:
    """(error, message) from a Catch result; Lambda causes are JSON with an errorMessage.

    A Fail state may not raise ``States.*`` names, so those become ``Workflow.*``.
    """
    error = failure.get("Error", "States.TaskFailed")
    if error.startswith("States."):
        error = "Workflow." + error.removeprefix("States.")
    cause = failure.get("Cause") or ""
    try:
        parsed = json.loads(cause)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "errorMessage" in parsed:
        cause = parsed["errorMessage"]
    return error, cause.strip()


def advice(error: str, again: str = "start the run again") -> str | None:
    """What to do about an error that is not one of TrainGrid's own (those say it in their
    message): AWS throttling beyond the retries, a step that timed out, a service's refusal."""
    service, _, code = error.rpartition(".")
    if code.endswith(THROTTLING_CODES):
        return (f"AWS throttled the {service or 'AWS'} calls of this step for longer than its "
                f"retries last: the account makes more {service or 'AWS'} requests than its "
                f"quota allows. What to do: {again} once the load has dropped, or ask for a "
                f"higher {service or 'AWS'} request quota")
    if error in TIMEOUTS:
        return ("A step did not finish within its time limit (a function's timeout, or a "
                f"service that did not answer). What to do: {again}; if it times out again, "
                "raise the step's Timeout in template.yaml")
    if service in SERVICES or error in AWS_ERRORS:
        return (f"{service or 'An AWS service'} refused a call of this step (see above: a quota, "
                f"a permission or a resource that changed). What to do: fix that, then {again}")
    if error.startswith("Workflow."):
        return ("This is a TrainGrid defect: report it with the execution's name. What to do: "
                f"{again}")
    return None


def fsx_quota_advice(error: str, state: Mapping[str, Any]) -> str | None:
    """What to do when FSx refused the run's file system for the account's limits
    (``ServiceLimitExceeded``: "a particular service limit was exceeded", botocore fsx): for
    storage, the quota the file system counts against and the increase to request."""
    # Step Functions' aws-sdk integrations name it FSx.ServiceLimitExceededException.
    if error.rpartition(".")[2].removesuffix("Exception") != "ServiceLimitExceeded":
        return None
    planned = (state.get("plan") or {}).get("file_system") or {}
    kind = (planned.get("lustre_configuration") or {}).get("DeploymentType", "SCRATCH_2")
    capacity = int(planned.get("storage_capacity_gib") or 0)
    quota = fsx_storage_quota(kind)
    return (f"FSx refused the {capacity:,} GiB {kind} file system: the account's FSx limits in "
            f"this region are reached (the storage of all its {kind.split('_')[0].lower()} "
            f"file systems counts against \"{quota.name}\", {quota.code}, "
            f"{quota.default_gib:,} GiB by default; or the number of file systems). What to "
            f"do: delete file systems no longer needed (aws fsx describe-file-systems), or "
            f"request an increase to at least this file system plus what the others hold "
            f"(FSx for Lustre storage is an adjustable Service Quota): "
            f"{quota.increase_command(capacity)}, then set the stack's FsxStorageQuotaGiB to "
            f"the value granted and start the run again")


def primary(state: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """(error, cause, key of the failure it came from) of what ended the run."""
    job = state.get("job") or {}
    if "failure" in state:
        return (*readable(state["failure"]), "failure")
    if job.get("error"):
        return job["error"], job.get("cause") or "the training job failed", None
    if "archive_failure" in state:
        return (*readable(state["archive_failure"]), "archive_failure")
    if "release_failure" in state:
        return FileSystemNotDeleted.__name__, "", None
    return UnknownFailure.__name__, "the run ended without a recorded reason", None


def notes(state: Mapping[str, Any], primary_key: str | None) -> list[str]:
    """What else a person needs to know: kept or undeleted resources, archived artifacts."""
    job = state.get("job") or {}
    fs_id = (state.get("file_system") or {}).get("id")
    found = []
    if "archive_failure" in state and primary_key != "archive_failure":
        found.append("Archiving the outputs failed too: " + readable(state["archive_failure"])[1])
    if retained := state.get("retained"):
        found.append(
            f"The file system {retained['file_system_id']} is kept until "
            f"{retained['expires_at']} so nothing is lost: {retained['where']}. Copy what you "
            "need, then delete it (the janitor deletes it after that time)."
        )
    if "retain_failure" in state:
        found.append(
            f"Tagging the kept file system {fs_id} failed ({readable(state['retain_failure'])[1]});"
            " it was not deleted: copy its outputs before deleting it yourself."
        )
    if "release_failure" in state:
        error, cause = readable(state["release_failure"])
        found.append(
            f"The file system {fs_id} could not be deleted ({cause or error}). What to do: "
            f"nothing, the janitor deletes it once its data is safe; or delete it yourself "
            f"with: aws fsx delete-file-system --file-system-id {fs_id}"
        )
    elif "released" in state:
        found.append(f"The file system {fs_id} was deleted.")
    planned = (state.get("plan") or {}).get("job") or {}
    attempts = planned.get("attempts") or []
    if len(attempts) > 1:
        found.append(f"The run made {len(attempts)} attempts: {attempts_summary(attempts)}")
    if str(planned.get("decision", "")).startswith("not retried"):
        found.append(f"The last attempt was {planned['decision']}")
    archive = state.get("archive") or {}
    if archive.get("manifest"):
        count = archive["objects"]
        found.append(f"Artifacts archived: {archive['manifest']} "
                     f"({count} object{'s' if count != 1 else ''}).")
    if "stop_failure" in state:
        found.append(
            f"Stopping Batch job {job.get('id')} failed; stop it with: "
            f"aws batch terminate-job --job-id {job.get('id')} --reason traingrid"
        )
    return found


def explain(state: Mapping[str, Any]) -> Explained:
    error, cause, key = primary(state)
    what_to_do = fsx_quota_advice(error, state) or advice(error)
    parts = ([cause] if cause else []) + ([what_to_do] if what_to_do else []) + notes(state, key)
    text = " ".join(p.rstrip() if p.rstrip().endswith(".") else p.rstrip() + "." for p in parts)
    return {"error": error, "cause": text[:MAX_CAUSE]}
