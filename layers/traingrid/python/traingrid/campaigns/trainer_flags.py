"""The trainer's flags a fan-out may set as hyperparameters, and the values each takes.

SageMaker passes every hyperparameter to the image's entry point as ``--name <text>``, and the
trainer's parser (``traingrid_trainer.config.parser``, in the node image: the layer cannot
import it) exits 2 on a value it does not take, so the job would fail in every region. The
request's edge checks each value against ``TRAINER_FLAGS``, this parser's types and choices
written as a table; tests/security/test_campaign_hyperparameters.py holds the table to the
parser itself, value by value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from pydantic.config import JsonDict

# The largest integer every JSON reader holds exactly (2^53): a flag's number is within this
# of 0, so its text is at most 24 characters (a float's longest). Every value is short: the
# plan repeats a fan-out's hyperparameters in each region's job, all in one state of at most
# 256 KiB.
MAX_NUMBER = 2**53


@dataclass(frozen=True)
class Flag:
    """What one flag takes: ``integer`` (a JSON number without a fraction, from ``minimum``;
    or one of ``words``), ``number`` (more than 0 when ``positive``) or ``choice`` (one of
    ``words``); a number is at most MAX_NUMBER either way."""

    kind: Literal["integer", "number", "choice"]
    minimum: int = 0
    positive: bool = False
    words: tuple[str, ...] = ()


POSITIVE_INTEGER = Flag("integer", minimum=1)  # the parser's _positive
NON_NEGATIVE_INTEGER = Flag("integer")  # _non_negative
NUMBER = Flag("number")  # float
POSITIVE_NUMBER = Flag("number", positive=True)  # _positive_float

# Every option of the parser that takes a value, but the folders SageMaker decides and the
# fault injection (TRAINER_OPTIONS_NOT_HYPERPARAMETERS).
TRAINER_FLAGS: dict[str, Flag] = {
    "num_epochs": POSITIVE_INTEGER,
    "batch_size": POSITIVE_INTEGER,
    "warmup_epochs": Flag("integer", words=("auto",)),  # _warmup: epochs, or the recipe's
    "lr_decay_mode": Flag("choice", words=("poly", "cosine", "step", "linear")),
    "lr": NUMBER,
    "momentum": NUMBER,
    "weight_decay": NUMBER,
    "label_smoothing": NUMBER,
    "image_size": POSITIVE_INTEGER,
    "steps_per_epoch": POSITIVE_INTEGER,
    "train_images": POSITIVE_INTEGER,
    "log_every": POSITIVE_INTEGER,
    "loader_workers": NON_NEGATIVE_INTEGER,
    "optimizer": Flag("choice", words=("auto", "sgd", "lars")),
    "lars_lr": POSITIVE_NUMBER,
    "lars_trust_coefficient": POSITIVE_NUMBER,
    "input_pipeline": Flag("choice", words=("auto", "cpu", "gpu", "legacy")),
}
# The parser's options a request may not set, and why.
TRAINER_OPTIONS_NOT_HYPERPARAMETERS = {
    "data_dir": "SageMaker's train channel", "output_dir": "SageMaker's model folder",
    "checkpoint_dir": "SageMaker's checkpoint folder", "fail_rank": "fault injection",
    "hang_rank": "fault injection (the watchdog's test)",
    "synthetic": "a flag without a value", "clear_log": "a flag without a value",
    "benchmark_input": "a flag without a value (measures the input pipeline, trains nothing)",
    "benchmark_seconds": "the input benchmark's, not training's",
    "preflight": "a flag without a value; the stack's pre-flight check (TRAINGRID_PREFLIGHT)",
}


def takes(flag: Flag) -> str:
    """What ``flag`` takes, in words."""
    if flag.kind == "choice":
        return f"one of {', '.join(flag.words)}"
    if flag.kind == "number":
        return "a number more than 0 (at most 2^53)" if flag.positive else (
            "a number (from -2^53 to 2^53)")
    words = "".join(f" or {word}" for word in flag.words)
    return f"an integer of at least {flag.minimum} (at most 2^53){words}"


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


def flag_value(name: str, value: Any) -> str | int | float:
    """``value`` as the trainer's ``--name`` takes it, an integral number as an integer (the
    trainer's ``int()`` refuses "30.0"); ValueError saying what it takes otherwise."""
    flag = TRAINER_FLAGS[name]
    if isinstance(value, str) and value in flag.words:
        return value
    # NaN and the infinities are no JSON, and compare false.
    number = (isinstance(value, int | float) and not isinstance(value, bool)
              and -MAX_NUMBER <= value <= MAX_NUMBER)
    if flag.kind == "number" and number and (value > 0 or not flag.positive):
        return value
    if (flag.kind == "integer" and number and float(value).is_integer()
            and value >= flag.minimum):
        return int(value)
    raise ValueError(f"{name} must be {takes(flag)} (the trainer's --{name}), not "
                     f"{_shown(value)}")


def flag_schema(flag: Flag) -> JsonDict:
    """The same rule, as JSON Schema states it (an integer there is any number without a
    fraction, as here)."""
    words: JsonDict = {"type": "string", "enum": list(flag.words)}
    if flag.kind == "choice":
        return words
    if flag.kind == "number":
        low: JsonDict = {"exclusiveMinimum": 0} if flag.positive else {"minimum": -MAX_NUMBER}
        return {"type": "number", "maximum": MAX_NUMBER, **low}
    integer: JsonDict = {"type": "integer", "minimum": flag.minimum, "maximum": MAX_NUMBER}
    return {"anyOf": [integer, words]} if flag.words else integer
