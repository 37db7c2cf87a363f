"""What the routes share: reading a request's body and query, and JSON responses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools.event_handler import Response, content_types

from traingrid.errors import RequestInvalid
from traingrid.validation import load_json, parse

if TYPE_CHECKING:
    from pydantic import BaseModel

# pydantic comes with the model a route parses (``query``), not with this module.
ModelT = TypeVar("ModelT", bound="BaseModel")


def json_body(body: str | None) -> Any:
    """The parsed body; RequestInvalid if it is missing or not JSON."""
    if not body:
        raise RequestInvalid([{"pointer": "", "message": "the body is empty; send a JSON "
                                                         "object"}])
    try:
        return load_json(body)
    except ValueError as error:
        raise RequestInvalid([{"pointer": "", "message": f"the body is not JSON: {error}"}]
                             ) from None


def query(model: type[ModelT], parameters: dict[str, str] | None) -> ModelT:
    """Query parameters are text: ``limit=5`` is the number 5."""
    return parse(model, parameters or {}, "query", strict=False)


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON,
                    body=body, headers=headers)


def submitted(result: dict[str, Any]) -> Response:
    """202 for a run this request started, 200 for one that already existed."""
    return json_response(202 if result["started"] else 200, result,
                         {"Location": f"/runs/{result['name']}"})
