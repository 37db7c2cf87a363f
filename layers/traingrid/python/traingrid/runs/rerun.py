"""Re-running a run: the same request under a derived name, started as any submission is.

The request is read from the old run's execution input; the new run is ``<name>-r2`` (or the
next number after an ``-rN`` name's, the name cut to leave room: Step Functions' 80
characters), the first such name that is free. Its trigger names the run it re-runs
(``rerun_of``, shown by ``GET /runs/{name}``). A re-run of a run whose earlier re-run is still
running with the same request is that run (the API answers 200): a retried request starts one
run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from itertools import count
from typing import Any

from traingrid.errors import RequestInvalid, RunConflict, RunNotFound
from traingrid.runs.reader import RunReader
from traingrid.runs.submit import Submission, training_submission
from traingrid.runs.view import RERUN_OF, TRAINING_RUN
from traingrid.settings import ApiSettings
from traingrid.vocabulary.statuses import RunStatus

MAX_NAME = 80  # Step Functions' execution names (runs.reader.EXECUTION_NAME)
_RERUN = re.compile(r"^(?P<base>.+)-r(?P<n>\d{1,6})$")


def rerun_names(name: str) -> Iterator[str]:
    """``<name>-r2``, ``-r3``, … (after an ``-rN`` name, its base's next numbers)."""
    found = _RERUN.match(name)
    base, first = (found["base"], int(found["n"]) + 1) if found else (name, 2)
    for n in count(first):
        suffix = f"-r{n}"
        yield base[:MAX_NAME - len(suffix)] + suffix


def _existing(reader: RunReader, name: str) -> dict[str, Any] | None:
    try:
        return reader.find(name)[1]
    except RunNotFound:
        return None


def rerun_submission(reader: RunReader, settings: ApiSettings, name: str, now: datetime,
                     idempotency_key: str | None = None) -> Submission:
    """The submission that re-runs ``name``: RunNotFound if there is no such run, RunConflict
    while it runs (or for a fan-out, started again from its campaign)."""
    pipeline, description = reader.find(name)
    if pipeline != TRAINING_RUN:
        raise RunConflict(f"{name} is a campaign fan-out: start its campaign again with POST "
                          "/campaigns/{id}/runs (traingrid submit --campaign ID).")
    if description["status"] == RunStatus.RUNNING:
        raise RunConflict(f"{name} is still RUNNING: cancel it first (traingrid cancel {name}, "
                          f"POST /runs/{name}/cancel) or wait for it to end.")
    request = json.loads(description.get("input") or "{}").get("request") or {}
    if "command" in request:
        # A command runs only for whom the stack owner granted POST /command-runs: a re-run
        # through this route would start it for anyone who may start a run.
        raise RequestInvalid([{"pointer": "/command", "message": (
            f"{name} ran a command of its own, which only POST /command-runs starts: send its "
            "request there again")}])
    for candidate in rerun_names(name):
        submission = training_submission({**request, "name": candidate}, settings, now,
                                         idempotency_key)
        submission = replace(submission, payload={
            **submission.payload, "trigger": {**submission.payload["trigger"],
                                              RERUN_OF: name}})
        taken = _existing(reader, candidate)
        if taken is None or (taken["status"] == RunStatus.RUNNING and json.loads(
                taken.get("input") or "null") == submission.payload):
            return submission
    raise AssertionError("unreachable: the names are endless")  # pragma: no cover
