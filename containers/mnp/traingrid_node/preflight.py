"""The pre-flight check's thresholds and verdict (the trainer measures, ``traingrid_trainer.
preflight``; the emulator's stand-in job judges its figures the same way): standard library
only, like the rest of the node program."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

PREFLIGHT_FILE = "preflight.json"  # in the run's output folder
INTEGER_FIELDS = ("steps", "allreduce_mib", "read_mb", "repeats")


@dataclass(frozen=True)
class Thresholds:
    """What the check measures and what fails it; 0 means no such floor."""

    min_share: float = 0.5  # of the median of the other ranks' images/s
    min_read_share: float = 0.25  # of the others' read MB/s (a shared file system is noisy)
    min_images_per_s: float = 0.0  # a rank's floor for the instance type
    min_bus_gb_s: float = 0.0  # the all-reduce's floor for the instance type
    min_read_mb_s: float = 0.0
    steps: int = 5  # measured training steps, after one unmeasured
    # A rank judged slow is measured again, up to this many times, and judged on its best
    # figure: a busy moment passes, a slow node stays slow.
    repeats: int = 2
    allreduce_mib: int = 64
    read_mb: int = 256
    seconds: float = 180.0  # the whole check's budget
    instance_type: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Thresholds:
        """The job's ``TRAINGRID_PREFLIGHT`` (a JSON object of these fields), else defaults.
        Unknown fields or wrong types are an error listing every problem."""
        raw = env.get("TRAINGRID_PREFLIGHT", "").strip()
        if not raw or raw in ("1", "on"):
            return cls()
        try:
            given = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"TRAINGRID_PREFLIGHT is not JSON: {exc}") from None
        if not isinstance(given, dict):
            raise ValueError("TRAINGRID_PREFLIGHT must be a JSON object")
        known = {f.name: f.type for f in fields(cls)}
        problems = [f"unknown field {k!r}" for k in given if k not in known]
        for key, value in given.items():
            if key == "instance_type":
                if not isinstance(value, str):
                    problems.append("instance_type must be a string")
            elif key in known and (not isinstance(value, int | float) or isinstance(value, bool)
                                   or value < 0):
                problems.append(f"{key} must be a number >= 0, not {value!r}")
        if problems:
            raise ValueError("TRAINGRID_PREFLIGHT: " + "; ".join(problems))
        values: dict[str, Any] = {k: (int(v) if k in INTEGER_FIELDS else v)
                                  for k, v in given.items()}
        return cls(**values)


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def verdict(ranks: Sequence[Mapping[str, Any]], bus_gb_s: float | None,
            thresholds: Thresholds) -> list[str]:
    """Every reason the job should not start, naming the node and the figure. ``ranks``: one
    entry a rank (``rank``, ``address``, ``images_per_s``, ``read_mb_s`` or None)."""
    problems = []
    kind = f" for {thresholds.instance_type}" if thresholds.instance_type else ""
    checks = (("images_per_s", "images/s", thresholds.min_share, thresholds.min_images_per_s),
              ("read_mb_s", "MB/s read", thresholds.min_read_share, thresholds.min_read_mb_s))
    for key, unit, share, floor in checks:
        measured = [(r, float(r[key])) for r in ranks if r.get(key) is not None]
        for entry, value in measured:
            node = f"node {entry['address']} (rank {entry['rank']})"
            others = [v for e, v in measured if e is not entry]
            if others and share:
                median = statistics.median(others)
                if value < share * median:
                    problems.append(f"{node}: {_figure(value)} {unit}, median "
                                    f"{_figure(median)}: below {share:.0%}")
                    continue
            if floor and value < floor:
                problems.append(f"{node}: {_figure(value)} {unit}, below the floor of "
                                f"{_figure(floor)}{kind}")
    if bus_gb_s is not None and thresholds.min_bus_gb_s and bus_gb_s < thresholds.min_bus_gb_s:
        problems.append(f"all-reduce bus bandwidth {bus_gb_s:.2f} GB/s across {len(ranks)} "
                        f"ranks, below the floor of {thresholds.min_bus_gb_s:g} GB/s{kind}")
    return problems
