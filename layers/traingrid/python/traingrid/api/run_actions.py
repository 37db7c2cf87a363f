"""``/runs/{name}/cancel`` and ``/runs/{name}/rerun``: acting on a run that exists."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import Router

from traingrid import clock
from traingrid.api.http import json_body, json_response, submitted
from traingrid.api.idempotency import Submissions, key_of
from traingrid.errors import RequestInvalid
from traingrid.runs import cancel
from traingrid.runs.reader import RunReader
from traingrid.runs.submit import start
from traingrid.settings import ApiSettings


def no_fields(body: str | None) -> None:
    """These routes take an empty object (``{}``, which ``traingrid serve`` needs, as every
    POST's body) or nothing; anything else is a 400."""
    if body and json_body(body) != {}:
        raise RequestInvalid([{"pointer": "", "message": (
            "this route takes no fields: send {} or no body")}])


def router(settings: ApiSettings, submissions: Submissions) -> Router:
    routes = Router()
    reader = RunReader(settings)

    @routes.post("/runs/<name>/cancel")
    def cancel_run(name: str) -> Response:
        """Stop a running run (the abort path releases what it holds), saying who and when."""
        no_fields(routes.current_event.body)
        who = cancel.caller(routes.current_event.raw_event.get("requestContext"))
        result = cancel.cancel_run(reader, name, who)
        return json_response(202, result, {"Location": f"/runs/{name}"})

    @routes.post("/runs/<name>/rerun")
    def rerun(name: str) -> Response:
        """The run's request again, under the next free ``<name>-rN``, started as a submission
        is (validated, sized, idempotent)."""
        from traingrid.runs.rerun import rerun_submission

        event = routes.current_event
        key = key_of(event.headers)
        no_fields(event.body)
        result = submissions.once(
            f"POST /runs/{name}/rerun", key, {"rerun": name},
            lambda: start(rerun_submission(reader, settings, name, clock.service_now(), key)),
            routes.lambda_context)
        return submitted(result)

    return routes
