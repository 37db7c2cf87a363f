"""``/runs/{name}/cancel`` and ``/runs/{name}/rerun``: acting on a run that exists."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import Router

from traingrid.api.http import json_response
from traingrid.api.idempotency import Submissions
from traingrid.runs import cancel
from traingrid.runs.reader import RunReader
from traingrid.settings import ApiSettings


def router(settings: ApiSettings, submissions: Submissions) -> Router:
    routes = Router()
    reader = RunReader(settings)

    @routes.post("/runs/<name>/cancel")
    def cancel_run(name: str) -> Response:
        """Stop a running run (the abort path releases what it holds), saying who and when."""
        who = cancel.caller(routes.current_event.raw_event.get("requestContext"))
        result = cancel.cancel_run(reader, name, who)
        return json_response(202, result, {"Location": f"/runs/{name}"})

    return routes
