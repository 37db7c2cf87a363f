"""The API's resolver: its routers, and every domain error mapped to an HTTP answer here.

Error bodies are ``{"message"}``; a 400 (and a 403 for a dataset outside the data bucket, or a
command where none is taken) also lists the problems as ``{"pointer", "message"}`` (RFC 6901
JSON pointers into the request body), the first ``LISTED_PROBLEMS`` of ``problem_count``.
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError

from traingrid.api import campaigns, costs, run_actions, runs
from traingrid.api.http import json_response, json_text
from traingrid.api.idempotency import Submissions
from traingrid.errors import (
    CommandNotPermitted,
    DatasetNotFound,
    DatasetNotPermitted,
    IdempotencyKeyReused,
    NotFound,
    RequestInProgress,
    RequestInvalid,
    RequestTooLarge,
    RunConflict,
)
from traingrid.observability import logger
from traingrid.settings import ApiSettings

STATUS_OF = {NotFound: 404, DatasetNotFound: 404, RunConflict: 409, RequestInProgress: 409,
             IdempotencyKeyReused: 422, RequestTooLarge: 413}


def build(settings: ApiSettings) -> APIGatewayRestResolver:
    resolver = APIGatewayRestResolver(serializer=json_text)
    submissions = Submissions(settings.idempotency_table)
    resolver.include_router(runs.router(settings, submissions))
    resolver.include_router(run_actions.router(settings, submissions))
    resolver.include_router(campaigns.router(settings, submissions))
    resolver.include_router(costs.router(settings))

    @resolver.exception_handler(RequestInvalid)
    def invalid(error: RequestInvalid) -> Response:
        status = 403 if isinstance(error, DatasetNotPermitted | CommandNotPermitted) else 400
        return json_response(status, {"message": error.message, "problems": error.listed,
                                      "problem_count": len(error.problems)})

    @resolver.exception_handler(list(STATUS_OF))
    def refused(error: NotFound | DatasetNotFound | RunConflict | RequestInProgress
                | IdempotencyKeyReused | RequestTooLarge) -> Response:
        status = next(code for kind, code in STATUS_OF.items() if isinstance(error, kind))
        return json_response(status, {"message": error.message})

    @resolver.not_found
    def no_route(error: NotFoundError) -> Response:
        event = resolver.current_event
        return json_response(404, {"message": f"No route {event.http_method} {event.path}; "
                                              "see schema/openapi.yaml."})

    # Registered last and matched last: a more specific handler above always wins.
    @resolver.exception_handler(Exception)
    def unexpected(error: Exception) -> Response:
        logger.exception("request failed")
        request_id = getattr(resolver.lambda_context, "aws_request_id", "?")
        return json_response(500, {"message": f"TrainGrid could not answer ({type(error).__name__}"
                                              f"); the API function's log has the details "
                                              f"(request {request_id})."})

    return resolver
