"""What the routes share: reading a request's body and query, and JSON responses."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.shared.json_encoder import Encoder

from traingrid.errors import RequestInvalid
from traingrid.observability import logger
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


def _finite(document: Any) -> Any:
    if isinstance(document, float) and not math.isfinite(document):
        return None
    if isinstance(document, dict):
        return {k: _finite(v) for k, v in document.items()}
    return [_finite(v) for v in document] if isinstance(document, list) else document


def json_text(body: Any) -> str:
    """An answer's body as JSON, as Powertools writes it, but with finite numbers only: JSON
    has no NaN or Infinity (the console's parser refuses them), so one is written as null."""
    try:
        return json.dumps(body, separators=(",", ":"), cls=Encoder, allow_nan=False)
    except ValueError:  # a float out of JSON's range
        logger.warning("an answer held a number that is not finite; written as null")
        loose = json.loads(json.dumps(body, cls=Encoder))  # what Encoder made of it, NaN too
        return json.dumps(_finite(loose), separators=(",", ":"), allow_nan=False)
