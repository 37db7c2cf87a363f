"""Cancelling a run: its execution is stopped, saying who cancelled it and when.

A stopped execution ends ABORTED, and the path every ABORTED execution takes does the rest
(docs/janitor.md): the janitor, run at once by the execution's end, terminates its Batch job
(a fan-out's region branches are stopped with it, and their SageMaker jobs), archives what the
job wrote and deletes its file system, and records the run. The stop's ``error`` and
``cause`` are what ``GET /runs/{name}`` reads the cancellation back from.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from traingrid import clock
from traingrid.aws import stepfunctions
from traingrid.errors import RunConflict, TrainGridError
from traingrid.observability import logger
from traingrid.runs import view
from traingrid.runs.view import CANCELLED_ERROR, cancellation
from traingrid.vocabulary.statuses import RunStatus

if TYPE_CHECKING:
    from traingrid.runs.reader import RunReader

MAX_WHO = 200


def caller(request_context: dict[str, Any] | None) -> str:
    """Who sent the request: the signing IAM principal API Gateway names (``userArn``, else
    ``caller``), or, for an unsigned request (``traingrid serve``), where it came from."""
    identity = (request_context or {}).get("identity") or {}
    who = identity.get("userArn") or identity.get("caller")
    if not who:
        who = f"an unsigned request from {identity.get('sourceIp') or 'an unknown address'}"
    return " ".join(str(who).split())[:MAX_WHO]


def cancel_cause(who: str, moment: datetime) -> str:
    return (f"Cancelled by {who} at {clock.iso(moment)}. Its job is stopped, what it wrote is "
            "archived with the run's outputs and its file system deleted (the janitor). "
            "Start it again with traingrid rerun (POST /runs/{name}/rerun).")


def how_it_ended(description: dict[str, Any]) -> str:
    """A run's end in words: cancelled by whom and when, or its status and error."""
    cancelled = cancellation(description.get("error"), description.get("cause"))
    if cancelled:
        return f"was cancelled by {cancelled['by']} at {cancelled['at']}"
    error = description.get("error")
    return f"ended {description['status']}" + (f" ({error})" if error else "")


def cancel_run(reader: RunReader, name: str, who: str) -> dict[str, Any]:
    """Stop the run called ``name`` (RunNotFound if none), saying ``who`` cancelled it and
    when; RunConflict saying how it ended if it is not running (whoever ended it)."""
    pipeline, description = reader.find(name)
    arn = description["executionArn"]
    cause = cancel_cause(who, clock.service_now())
    if description["status"] == RunStatus.RUNNING:
        try:
            stepfunctions.stop_execution(arn, CANCELLED_ERROR, cause)
        except TrainGridError:
            if stepfunctions.describe_execution(arn)["status"] == RunStatus.RUNNING:
                raise
        description = stepfunctions.describe_execution(arn)
        if description["status"] == RunStatus.RUNNING:  # still ending the step in flight
            description = {**description, "status": RunStatus.ABORTED,
                           "error": CANCELLED_ERROR, "cause": cause}
        stopped = description.get("cause") == cause
    else:
        stopped = False
    cancelled = cancellation(description.get("error"), description.get("cause"))
    if not stopped or cancelled is None:  # it had ended, cancelled or otherwise
        raise RunConflict(f"{name} {how_it_ended(description)}: there is nothing to cancel. "
                          f"Start it again with traingrid rerun {name}.")
    logger.info(f"run {name} cancelled by {who}", extra={"execution_arn": arn})
    return {"name": name, "pipeline": pipeline, "status": description["status"],
            "cancelled": cancelled, "execution_arn": arn, "console_url": view.console_url(arn)}
