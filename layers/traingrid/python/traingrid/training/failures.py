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


def explain(state: dict[str, Any]) -> dict[str, str]:
    job = state.get("job") or {}
    file_system = state.get("file_system") or {}
    archive_failed = "archive_failure" in state
    if "failure" in state:
        error, cause = readable(state["failure"])
    elif job.get("error"):
        error, cause = job["error"], job.get("cause") or "the training job failed"
    elif archive_failed:
        error, cause = readable(state["archive_failure"])
        archive_failed = False  # it is the primary cause; no need to say it twice
    elif "release_failure" in state:
        error, cause = "FileSystemNotDeleted", ""
    else:
        error, cause = "UnknownFailure", "the run ended without a recorded reason"
    notes = [cause] if cause else []

    if archive_failed:
        notes.append("Archiving the outputs failed too: " + readable(state["archive_failure"])[1])
    if retained := state.get("retained"):
        notes.append(
            f"The file system {retained['file_system_id']} is kept until "
            f"{retained['expires_at']} so nothing is lost: {retained['where']}. Copy what you "
            "need, then delete it (the janitor deletes it after that time)."
        )
    if "retain_failure" in state:
        _, why = readable(state["retain_failure"])
        notes.append(
            f"Tagging the kept file system {file_system.get('id')} failed ({why}); it was not "
            "deleted: copy its outputs before deleting it yourself."
        )
    if "release_failure" in state:
        _, why = readable(state["release_failure"])
        notes.append(
            f"The file system {file_system.get('id')} could not be deleted ({why}); delete it "
            f"with: aws fsx delete-file-system --file-system-id {file_system.get('id')}"
        )
    elif "released" in state:
        notes.append(f"The file system {file_system.get('id')} was deleted.")
    if archive := state.get("archive"):
        notes.append(f"Artifacts archived: {archive['manifest']} ({archive['objects']} "
                     f"object{'s' if archive['objects'] != 1 else ''}).")
    if "stop_failure" in state:
        notes.append(
            f"Stopping Batch job {job.get('id')} failed; stop it with: "
            f"aws batch terminate-job --job-id {job.get('id')} --reason traingrid"
        )
    text = " ".join(n.rstrip() if n.rstrip().endswith(".") else n.rstrip() + "." for n in notes)
    return {"error": error, "cause": text[:MAX_CAUSE]}
