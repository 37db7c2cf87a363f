"""Turn pydantic's validation errors into problems a person can act on: every one at once."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from traingrid.errors import RequestInvalid

ModelT = TypeVar("ModelT", bound=BaseModel)


def json_pointer(location: tuple[int | str, ...]) -> str:
    """RFC 6901 pointer for a pydantic error location (``("fsx", "deployment_type")``)."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in location]
    return "".join(f"/{p}" for p in parts)


def problems_of(error: ValidationError) -> list[dict[str, str]]:
    problems = []
    for item in error.errors(include_url=False):
        # Model validators report at the model itself; their message carries its own context.
        message = item["msg"].removeprefix("Value error, ")
        problems.append({"pointer": json_pointer(item["loc"]), "message": message})
    return problems


def parse(model: type[ModelT], data: Any, source: str = "request") -> ModelT:
    """Validate ``data`` against ``model``; raise RequestInvalid listing every problem."""
    if not isinstance(data, dict):
        raise RequestInvalid(
            [{"pointer": "", "message": f"expected a JSON object, got {type(data).__name__}"}],
            source,
        )
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise RequestInvalid(problems_of(error), source) from None
