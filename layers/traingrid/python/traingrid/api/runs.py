"""``/runs``: submit a TrainingRun, list recent runs, read one run, its logs and curves; ``/plans``:
the plan a request would get, starting nothing.

The request models (pydantic) are imported by the routes that parse a request, when they run:
reading a run, the API's most frequent request, does not load them at a cold start.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import Router

from traingrid import clock
from traingrid.api.http import json_body, json_response, query, submitted
from traingrid.api.idempotency import Submissions, key_of
from traingrid.errors import CommandNotPermitted
from traingrid.runs.reader import RunReader
from traingrid.runs.submit import start, training_submission
from traingrid.settings import ApiSettings


def planned(status: int, body: dict[str, Any]) -> Response:
    return json_response(status, body, {"Location": body["next"]} if status == 202 else None)


def router(settings: ApiSettings, submissions: Submissions) -> Router:
    routes = Router()
    reader = RunReader(settings)

    @routes.post("/runs")
    def submit_run() -> Response:
        event = routes.current_event
        key = key_of(event.headers)
        body = json_body(event.body)
        result = submissions.once(
            "POST /runs", key, body,
            lambda: start(training_submission(body, settings, clock.service_now(), key)),
            routes.lambda_context,
        )
        return submitted(result)

    @routes.post("/command-runs")
    def submit_command_run() -> Response:
        """POST /runs that may name the command every node runs: its own route, so that
        execute-api:Invoke on it is a grant of its own, taken only where the stack allows."""
        from traingrid.training.run_request import COMMAND_PARAMETER, COMMAND_ROUTE

        if not settings.allow_run_commands:
            raise CommandNotPermitted([{"pointer": "", "message": (
                f"this stack runs only the image's trainer: a run's own command needs the "
                f"stack deployed with {COMMAND_PARAMETER}=true (and execute-api:Invoke on "
                f"{COMMAND_ROUTE}); use POST /runs without a command")}])
        event = routes.current_event
        key = key_of(event.headers)
        body = json_body(event.body)
        result = submissions.once(
            COMMAND_ROUTE, key, body,
            lambda: start(training_submission(body, settings, clock.service_now(), key,
                                              command_route=True)),
            routes.lambda_context,
        )
        return submitted(result)

    @routes.post("/plans")
    def plan_run() -> Response:
        """A dry run: the plan a request would get (file system, epoch time, cost), starting
        nothing; 202 with the GET that goes on while a large dataset is still being listed."""
        from traingrid.training.plan_step import plan_request

        return planned(*plan_request(json_body(routes.current_event.body), settings,
                                     routes.lambda_context.get_remaining_time_in_millis()))

    @routes.get("/plans/<token>")
    def follow_plan(token: str) -> Response:
        from traingrid.training.plan_step import plan_request

        return planned(*plan_request(None, settings,
                                     routes.lambda_context.get_remaining_time_in_millis(),
                                     token))

    @routes.get("/runs")
    def list_runs() -> dict[str, Any]:
        from traingrid.api.queries import RunsQuery

        wanted = query(RunsQuery, routes.current_event.query_string_parameters)
        return reader.recent(wanted.limit, wanted.next_token, wanted.pipeline, wanted.status)

    @routes.get("/runs/<name>")
    def describe_run(name: str) -> dict[str, Any]:
        return reader.describe(name)

    @routes.get("/runs/<name>/logs")
    def run_logs(name: str) -> dict[str, Any]:
        return reader.logs(name)

    @routes.get("/runs/<name>/metrics")
    def run_metrics(name: str) -> dict[str, Any]:
        from traingrid.runs.metrics import MetricsQuery

        wanted = query(MetricsQuery, routes.current_event.query_string_parameters)
        return reader.metrics(name, wanted)

    return routes
