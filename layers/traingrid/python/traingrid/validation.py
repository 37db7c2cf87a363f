"""Turn pydantic's validation errors into problems a person can act on: every one at once."""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, get_args

from traingrid.errors import RequestInvalid

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

# pydantic is imported by the models ``parse`` is given, not here: a function that only reads
# JSON (``load_json``) does not load it.
ModelT = TypeVar("ModelT", bound="BaseModel")

# No request nests more than a few levels; a deeper document is refused before it can exhaust
# the parser's (or the validator's) recursion.
MAX_JSON_DEPTH = 32
# No object of a request has this many fields: one with more keys is refused as a whole, not
# key by key (``at_most``).
MAX_KEYS = 100


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


class RuleBroken(ValueError):
    """A validator's refusal of one value (``fact``) by a ``rule`` that many values may break,
    such as the list of names taken: the problems state the rule once, with the first."""

    def __init__(self, fact: str, rule: str) -> None:
        super().__init__(f"{fact}; {rule}")
        self.fact, self.rule = fact, rule


def _model_in(annotation: Any) -> Any:
    """The first pydantic model in a field's type (``Fsx | None``, ``list[Node]``), if any."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    return next((m for m in map(_model_in, get_args(annotation)) if m is not None), None)


def _fields_at(model: Any, location: tuple[int | str, ...]) -> list[str]:
    """The field names of the model that holds ``location``'s last step, as far as the
    fields lead (a list's index or a map's key stays in the model the field led to)."""
    for step in location[:-1]:
        field = model.model_fields.get(step) if isinstance(step, str) else None
        if field is not None:
            model = _model_in(field.annotation)
            if model is None:
                return []
    return list(model.model_fields)


def _unknown_field(name: object, fields: list[str]) -> str:
    close = difflib.get_close_matches(str(name), fields, n=1)
    return "unknown field" + (f"; did you mean {close[0]!r}?" if close else "")


def problems_of(error: ValidationError, data: Any = None,
                model: Any = None) -> list[dict[str, str]]:
    """Each of pydantic's errors as ``{"pointer", "message"}``; given the ``model``, a key it
    does not take is named with the closest field (a typo: ``"nodse"``, did you mean
    ``"nodes"``?)."""
    problems = []
    seen: set[tuple[str, str]] = set()
    rules: set[str] = set()
    for item in error.errors(include_url=False):
        # Model validators report at the model itself; their message carries its own context.
        message = item["msg"].removeprefix("Value error, ")
        broken = item.get("ctx", {}).get("error")
        if isinstance(broken, RuleBroken):
            message = broken.fact if broken.rule in rules else message
            rules.add(broken.rule)
        if item["type"] == "extra_forbidden" and model is not None and item["loc"]:
            message = _unknown_field(item["loc"][-1], _fields_at(model, item["loc"]))
        location = location_in(data, item["loc"], item["type"] == "missing")
        pointer = json_pointer(location)
        if (pointer, message) not in seen:  # one per place: a union reports each member tried
            seen.add((pointer, message))
            problems.append({"pointer": pointer, "message": message})
    return problems


def at_most(limit: int) -> Callable[[Any], Any]:
    """A before-validator refusing an object, map or list of more than ``limit`` entries as a
    whole, before pydantic checks its entries one by one (it checks a map's ``max_length``
    only after every key: a map of 10,000 unknown names would be 10,000 problems)."""

    def check(value: Any) -> Any:
        if isinstance(value, dict | list) and len(value) > limit:
            entries = "keys" if isinstance(value, dict) else "items"
            raise ValueError(f"has {len(value)} {entries}; at most {limit} are taken")
        return value

    return check


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
        raise RequestInvalid(problems_of(error, data, model), source) from None
