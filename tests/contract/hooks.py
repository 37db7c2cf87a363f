"""What Schemathesis cannot read from the document: POST /runs's one rule across fields.

JSON Schema checks each field alone; ``warmup_epochs`` must also be less than ``epochs`` (the
document says so in both fields' descriptions, and the API answers 400 otherwise). Positive
cases that break it are schema-valid yet invalid, so they are left out instead of being counted
as "schema-valid request rejected"; negative cases are kept. Loaded through schemathesis.toml.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from schemathesis.generation import GenerationMode

from traingrid.training.request import TrainingRunRequest

DEFAULT_EPOCHS = TrainingRunRequest.model_fields["epochs"].default
DEFAULT_WARMUP_EPOCHS = TrainingRunRequest.model_fields["warmup_epochs"].default


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@schemathesis.hook.apply_to(path="/runs", method="POST")
def filter_case(context: Any, case: Any) -> bool:
    body = case.body
    if case.meta is not None and case.meta.generation.mode is not GenerationMode.POSITIVE:
        return True
    if not isinstance(body, dict):
        return True
    epochs = body.get("epochs", DEFAULT_EPOCHS)
    warmup = body.get("warmup_epochs", DEFAULT_WARMUP_EPOCHS)
    return not (_number(epochs) and _number(warmup)) or warmup < epochs
