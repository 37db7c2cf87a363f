"""The run's metrics.json: what the trainer writes among the outputs, and what the emulator's
stand-in workload writes in its place. One contract, checked by ``problems``; and the names of
the trainer's other outputs, which the stand-in uses too."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

METRICS_FILE = "metrics.json"
# The rest of what the trainer leaves in the output directory.
CHECKPOINT_DIR = "checkpoints"  # epoch-NNNN.pt, the newest few
CHECKPOINT_NAME = re.compile(r"epoch-(\d{4,})\.pt")
# What the trainer prints every few steps, and SageMaker's metric definitions read from its log
# (Name → Regex; the campaign's CreateTrainingJob sends these, tested against the trainer).
# Only the first rank's own window line matches, whole: from the line's start (after the tag
# SageMaker's toolkit runs mpirun with, --tag-output: "[1,0]<stdout>:", which the toolkit
# writes as "[1,mpirank:0,algo-1]<stdout>:" where it reads the output itself) to its end. A
# line that only holds such words, an argparse error echoing a hyperparameter's value or a
# script's own print, is no loss.
_WINDOW = (r"^(?:\[[0-9]+,(?:mpirank:)?0(?:,algo-[0-9]+)?\]<stdout>: ?)?"
           r"\[trainer rank 0/[0-9]+\] epoch [0-9]+/[0-9]+ "
           r"step [0-9]+/[0-9]+ loss {loss} lr [0-9.]+ images/s {rate} \([0-9.]+ per GPU\)$")
LOG_METRICS = {
    "train:loss": _WINDOW.format(loss="([0-9.]+)", rate="[0-9.]+"),
    "train:images_per_second": _WINDOW.format(loss="[0-9.]+", rate="([0-9.]+)"),
}
FINAL_MODEL = "model/final.pt"


class Recovery(TypedDict):
    """One in-job recovery: a worker node lost, the ranks left restarted (elastic torchrun)
    and gone on from the newest checkpoint, in the same Batch job."""

    nodes_before: int
    nodes_after: int
    world_size_before: int
    world_size_after: int
    recovery_s: float  # the last step before the loss to the first one after it
    lost_work_s: float  # the steps since the checkpoint gone on from, as first trained
    steps_lost: int  # those steps, trained again


class Metrics(TypedDict):
    world_size: int  # ranks (one per GPU; one per node slot on CPU)
    device: str  # "cuda" or "cpu"
    epochs: int  # epochs trained, counting any resumed from a checkpoint
    steps: int  # optimizer steps this attempt ran
    global_batch: int  # images per step over all ranks
    images_per_second: float  # median over the logged windows, all ranks
    images_per_second_per_gpu: float  # the same per rank
    epoch_seconds: list[float]  # wall time of each epoch this attempt trained
    allreduce_ok: bool  # the start-up check that every rank adds up
    synthetic: bool  # random images instead of the dataset
    resumed_from: str | None  # the checkpoint this attempt started from
    top1_accuracy: float | None  # on the validation shards, when there are any
    recoveries: list[Recovery]  # this attempt's in-job recoveries, in order


FIELDS = Metrics.__annotations__


def metrics_document(
    *,
    world_size: int,
    device: str,
    epochs: int,
    steps: int,
    global_batch: int,
    images_per_second: float,
    epoch_seconds: Sequence[float],
    allreduce_ok: bool,
    synthetic: bool,
    resumed_from: str | None = None,
    top1_accuracy: float | None = None,
    recoveries: Sequence[Recovery] = (),
) -> Metrics:
    return {
        "world_size": world_size,
        "device": device,
        "epochs": epochs,
        "steps": steps,
        "global_batch": global_batch,
        "images_per_second": round(images_per_second, 3),
        "images_per_second_per_gpu": round(images_per_second / max(world_size, 1), 3),
        "epoch_seconds": [round(s, 3) for s in epoch_seconds],
        "allreduce_ok": allreduce_ok,
        "synthetic": synthetic,
        "resumed_from": resumed_from,
        "top1_accuracy": top1_accuracy,
        "recoveries": list(recoveries),
    }


def _non_negative(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


RECOVERY_FIELDS = Recovery.__annotations__


def valid_recovery(entry: Any) -> bool:
    return (isinstance(entry, dict) and set(entry) == set(RECOVERY_FIELDS)
            and all(_count(entry[n]) for n in ("nodes_before", "nodes_after",
                                               "world_size_before", "world_size_after",
                                               "steps_lost"))
            and _non_negative(entry["recovery_s"]) and _non_negative(entry["lost_work_s"]))


def _recoveries(value: Any) -> bool:
    return isinstance(value, list) and all(valid_recovery(r) for r in value)


# Each field's test and what it must be.
_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "world_size": (_count, "a non-negative integer"),
    "epochs": (_count, "a non-negative integer"),
    "steps": (_count, "a non-negative integer"),
    "global_batch": (_count, "a non-negative integer"),
    "device": (lambda v: v in ("cpu", "cuda"), "cpu or cuda"),
    "images_per_second": (_non_negative, "a non-negative number"),
    "images_per_second_per_gpu": (_non_negative, "a non-negative number"),
    "epoch_seconds": (lambda v: isinstance(v, list) and all(_non_negative(s) for s in v),
                      "a list of non-negative numbers"),
    "allreduce_ok": (lambda v: isinstance(v, bool), "true or false"),
    "synthetic": (lambda v: isinstance(v, bool), "true or false"),
    "resumed_from": (lambda v: v is None or isinstance(v, str), "a path or null"),
    "top1_accuracy": (lambda v: v is None or (_non_negative(v) and v <= 1),
                      "between 0 and 1, or null"),
    "recoveries": (_recoveries, f"a list of {{{', '.join(RECOVERY_FIELDS)}}} with "
                                "non-negative figures"),
}


def problems(document: Mapping[str, Any]) -> list[str]:
    """Everything wrong with a metrics document (empty when it honours the contract)."""
    found = [f"missing {name}" for name in FIELDS if name not in document]
    found += [f"unknown field {name}" for name in document if name not in FIELDS]
    for name, (valid, expected) in _RULES.items():
        if name in document and not valid(document[name]):
            found.append(f"{name} must be {expected}, got {document[name]!r}")
    return found


def write_metrics(output_dir: Path, document: Metrics) -> Path:
    """Write atomically, so a reader never sees half a file."""
    wrong = problems(document)
    if wrong:
        raise ValueError(f"metrics break their contract: {'; '.join(wrong)}")
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / METRICS_FILE
    partial = path.with_name(f".{METRICS_FILE}.tmp")
    partial.write_text(json.dumps(document, indent=1) + "\n")
    partial.replace(path)
    return path
