"""One readable error and cause for every way a TrainingRun can end badly.

The state machine records what went wrong under a few keys (``failure`` for the step that
failed, ``archive_failure``, ``release_failure`` …) and sends its whole state here; the result
goes straight into the Fail state, so the console shows what happened and what to do.
"""

from __future__ import annotations

import json
from typing import Any

# Step Functions caps a Fail state's cause at 32,768 characters.
MAX_CAUSE = 32_000


def readable(failure: dict[str, Any]) -> tuple[str, str]:
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


def primary(state: dict[str, Any]) -> tuple[str, str, str | None]:
    """(error, cause, key of the failure it came from) of what ended the run."""
    job = state.get("job") or {}
    if "failure" in state:
        return (*readable(state["failure"]), "failure")
    if job.get("error"):
        return job["error"], job.get("cause") or "the training job failed", None
    if "archive_failure" in state:
        return (*readable(state["archive_failure"]), "archive_failure")
    if "release_failure" in state:
        return "FileSystemNotDeleted", "", None
    return "UnknownFailure", "the run ended without a recorded reason", None


def notes(state: dict[str, Any], primary_key: str | None) -> list[str]:
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
        found.append(
            f"The file system {fs_id} could not be deleted "
            f"({readable(state['release_failure'])[1]}); delete it with: "
            f"aws fsx delete-file-system --file-system-id {fs_id}"
        )
    elif "released" in state:
        found.append(f"The file system {fs_id} was deleted.")
    if archive := state.get("archive"):
        count = archive["objects"]
        found.append(f"Artifacts archived: {archive['manifest']} "
                     f"({count} object{'s' if count != 1 else ''}).")
    if "stop_failure" in state:
        found.append(
            f"Stopping Batch job {job.get('id')} failed; stop it with: "
            f"aws batch terminate-job --job-id {job.get('id')} --reason traingrid"
        )
    return found


def explain(state: dict[str, Any]) -> dict[str, str]:
    error, cause, key = primary(state)
    parts = ([cause] if cause else []) + notes(state, key)
    text = " ".join(p.rstrip() if p.rstrip().endswith(".") else p.rstrip() + "." for p in parts)
    return {"error": error, "cause": text[:MAX_CAUSE]}
