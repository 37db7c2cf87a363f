"""The run's training curves while it trains: one JSON Lines file a node,
``metrics/node-<k>.jsonl`` among the outputs, a point a logged window (written by the node's
first rank, and by the emulator's stand-in workload in its place). The API reads them back
(``traingrid.runs.metrics``) and the console and ``traingrid watch`` plot them.

A point: ``t`` (Unix seconds), ``step`` (optimizer steps so far), ``epoch`` (fractional),
``loss`` (the node's first rank's), ``lr``, ``images_per_s`` (the node's ranks together, over
the window), ``step_s`` (wall seconds a step), ``input_s`` (seconds a step the node waited for
its input), and on a GPU ``gpu_util`` (percent) and ``gpu_mem_mib`` (peak memory allocated).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SERIES_DIR = "metrics"
TENSORBOARD_DIR = "tensorboard"
# What a point holds, and which fields every point has.
REQUIRED = ("t", "step", "epoch", "loss", "lr", "images_per_s", "step_s", "input_s")
OPTIONAL = ("gpu_util", "gpu_mem_mib")
FIELDS = REQUIRED + OPTIONAL


def node_name(index: int) -> str:
    return f"node-{index}"


def series_path(output_dir: Path, node: int) -> Path:
    return output_dir / SERIES_DIR / f"{node_name(node)}.jsonl"


def point(**values: float | int | None) -> dict[str, float | int]:
    """A point of the contract: its fields rounded; unknown fields and None left out."""
    unknown = set(values) - set(FIELDS)
    if unknown:
        raise ValueError(f"not fields of a point: {sorted(unknown)}")
    missing = [name for name in REQUIRED if values.get(name) is None]
    if missing:
        raise ValueError(f"a point needs {', '.join(missing)}")
    out: dict[str, float | int] = {}
    for name in FIELDS:
        value = values.get(name)
        if value is None:
            continue
        if not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
        out[name] = int(value) if name == "step" else round(float(value), 6)
    return out


def line(document: Mapping[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":")) + "\n"


def append(path: Path, document: Mapping[str, Any]) -> None:
    """One line a point, appended whole (a reader sees whole lines, or skips a torn last one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(line(document))
