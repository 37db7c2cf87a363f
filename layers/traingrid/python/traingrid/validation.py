"""Turn pydantic's validation errors into problems a person can act on: every one at once."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, TypeVar

from traingrid.errors import RequestInvalid

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

# pydantic is imported by the models ``parse`` is given, not here: a function that only reads
# JSON (``load_json``) does not load it.
ModelT = TypeVar("ModelT", bound="BaseModel")

# No request nests more than a few levels; a deeper document is refused before it can exhaust
# the parser's (or the validator's) recursion.
MAX_JSON_DEPTH = 32


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of range for a JSON number")
    return number


def _depth(document: Any) -> int:
    deepest, level = 0, [(document, 1)]
    while level:
        node, depth = level.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else node \
            if isinstance(node, list) else ()
        level.extend((child, depth + 1) for child in children
                     if isinstance(child, dict | list))
    return deepest if isinstance(document, dict | list) else 0


def load_json(data: str | bytes) -> Any:
    """A JSON document, strictly: no NaN or Infinity (Step Functions and other readers refuse
    them), no number out of a double's range, at most MAX_JSON_DEPTH levels deep. Raises
    ValueError saying what is wrong."""
    try:
        document = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep") from None
    if _depth(document) > MAX_JSON_DEPTH:
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
    return document


def json_pointer(location: tuple[int | str, ...]) -> str:
    """RFC 6901 pointer for a path of keys and indexes (``("fsx", "deployment_type")``)."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in location]
    return "".join(f"/{p}" for p in parts)


def _has(node: Any, step: int | str) -> bool:
    if isinstance(node, dict):
        return step in node
    return isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)


def location_in(data: Any, location: tuple[int | str, ...], missing: bool) -> tuple[Any, ...]:
    """The part of pydantic's error location that is a path in the input.

    pydantic adds steps that are not in the input: the member of a union it tried (``str``,
    ``int``), ``[key]`` for a mapping's key. The path follows the input as far as it goes; a
    missing member adds its own name, the one step the input cannot have.
    """
    path: list[Any] = []
    node = data
    for step in location:
        if not _has(node, step):
            if missing and isinstance(node, dict) and step != "[key]":
                path.append(step)
            break
        node = node[step]
        path.append(step)
    return tuple(path)


def problems_of(error: ValidationError, data: Any = None) -> list[dict[str, str]]:
    problems = []
    for item in error.errors(include_url=False):
        # Model validators report at the model itself; their message carries its own context.
        message = item["msg"].removeprefix("Value error, ")
        location = location_in(data, item["loc"], item["type"] == "missing")
        problem = {"pointer": json_pointer(location), "message": message}
        if problem not in problems:  # one per place: a union reports each member it tried
            problems.append(problem)
    return problems


def parse(model: type[ModelT], data: Any, source: str = "request", strict: bool = True) -> ModelT:
    """Validate ``data`` against ``model``; raise RequestInvalid listing every problem.

    A JSON document is read strictly, as its JSON Schema reads it (no ``"4"`` for 4, no
    ``true`` for 1); ``strict=False`` is for text that stands for values (query strings).
    """
    if not isinstance(data, dict):
        raise RequestInvalid(
            [{"pointer": "", "message": f"expected a JSON object, got {type(data).__name__}"}],
            source,
        )
    from pydantic import ValidationError  # loaded already: ``model`` is a pydantic model

    try:
        if strict:
            return model.model_validate_json(json.dumps(data), strict=True)
        return model.model_validate(data)
    except ValidationError as error:
        raise RequestInvalid(problems_of(error, data), source) from None
