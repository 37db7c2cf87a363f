"""Checkpoints in the run's directory on the file system; resume from the newest.

Rank 0 writes ``epoch-NNNN.pt`` at the end of every epoch and, inside an epoch, when the
checkpoint interval has passed (``interval``: Young/Daly, from the measured time to write one
and the job's expected time between failures) or when the container is being stopped
(SIGTERM): ``epoch-NNNN-step-SSSSSS.pt``, ``SSSSSS`` steps into the epoch after epoch ``NNNN``.
Each file is written atomically (a partial file is never the newest); the last ``KEEP`` of each
kind are kept, and the final weights as ``model/final.pt``. Every rank reads the newest at
start, so a restarted or resubmitted job goes on where it stopped.
"""

from __future__ import annotations

import io
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from traingrid_node.metrics import CHECKPOINT_NAME, FINAL_MODEL

KEEP = 3
STEP_NAME = re.compile(r"epoch-(\d{4,})-step-(\d{6,})\.pt")
# The expected time between interruptions of one node, for the checkpoint interval: Meta's
# Llama 3 run saw 419 unexpected interruptions in 54 days on 16,384 GPUs, 2,048 8-GPU nodes
# (54 x 24 x 2048 / 419 = 6,335 node-hours between failures).
DEFAULT_NODE_MTBF_HOURS = 54 * 24 * 2048 / 419


@dataclass(frozen=True)
class Resumed:
    epoch: int  # epochs already trained
    path: Path
    step: int = 0  # steps of the next epoch already trained (a mid-epoch checkpoint)
    steps_per_epoch: int = 0  # the steps of an epoch when it was written (0: not recorded)

    def step_in(self, steps_per_epoch: int) -> int:
        """Where to go on in an epoch of ``steps_per_epoch`` steps (fewer nodes: more steps)."""
        if not self.step or not self.steps_per_epoch:
            return self.step
        return min(steps_per_epoch - 1, round(self.step * steps_per_epoch
                                              / self.steps_per_epoch))


def young_daly_interval(checkpoint_s: float, mtbf_s: float) -> float:
    """The checkpoint interval that loses the least expected time: sqrt(2 * C * MTBF), with C
    the time to write one and MTBF the job's mean time between failures (Young 1974, Daly
    2006's first-order optimum)."""
    if checkpoint_s <= 0 or mtbf_s <= 0:
        raise ValueError(f"checkpoint time {checkpoint_s} and MTBF {mtbf_s} must be positive")
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def job_mtbf_s(node_mtbf_hours: float, nodes: int) -> float:
    """A job fails when any of its nodes does: ``nodes`` times as often as one node."""
    return node_mtbf_hours * 3600.0 / max(1, nodes)


class Interval:
    """When rank 0 writes the next mid-epoch checkpoint: ``young_daly_interval`` of the
    slowest of the last writes it timed (before the first, of the time to serialize the
    state into memory, measured at start) and the job's MTBF."""

    def __init__(self, mtbf_s: float, estimate_s: float, clock: Any = time.monotonic) -> None:
        self.mtbf_s = mtbf_s
        self.clock = clock
        self.measured: list[float] = [max(estimate_s, 1e-3)]
        self.last = clock()

    @property
    def seconds(self) -> float:
        return young_daly_interval(max(self.measured[-3:]), self.mtbf_s)

    def due(self) -> bool:
        return self.clock() - self.last >= self.seconds

    def wrote(self, seconds: float) -> None:
        if len(self.measured) == 1 and self.measured[0] <= seconds:
            self.measured.clear()  # the in-memory estimate only stood in for a real write
        self.measured.append(seconds)
        self.last = self.clock()


def serialize_seconds(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> float:
    """The time to serialize the state into memory: a lower bound of a checkpoint's."""
    started = time.perf_counter()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, io.BytesIO())
    return time.perf_counter() - started


def _position(path: Path) -> tuple[int, int] | None:
    if m := CHECKPOINT_NAME.fullmatch(path.name):
        return int(m.group(1)), 0
    if m := STEP_NAME.fullmatch(path.name):
        return int(m.group(1)), int(m.group(2))
    return None


def newest(directory: Path) -> Path | None:
    found = [(position, p) for p in directory.glob("epoch-*.pt")
             if (position := _position(p)) is not None]
    return max(found)[1] if found else None


def _write(path: Path, state: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    torch.save(state, partial)
    partial.replace(path)
    return path


def save(directory: Path, epoch: int, model: torch.nn.Module,
         optimizer: torch.optim.Optimizer, step: int = 0, steps_per_epoch: int = 0) -> Path:
    """``epoch`` epochs and ``step`` steps of the next one trained."""
    name = f"epoch-{epoch:04d}-step-{step:06d}.pt" if step else f"epoch-{epoch:04d}.pt"
    path = _write(directory / name, {"epoch": epoch, "step": step,
                                     "steps_per_epoch": steps_per_epoch,
                                     "model": model.state_dict(),
                                     "optimizer": optimizer.state_dict()})
    for pattern in (CHECKPOINT_NAME, STEP_NAME):
        kind = sorted(p for p in directory.glob("epoch-*.pt") if pattern.fullmatch(p.name))
        for old in kind[:-KEEP]:
            old.unlink(missing_ok=True)
    return path


def save_final(output_dir: Path, model: torch.nn.Module) -> Path:
    """The trained weights alone, for whoever serves or fine-tunes the model."""
    return _write(output_dir / FINAL_MODEL, model.state_dict())


def resume(directory: Path, model: torch.nn.Module,
           optimizer: torch.optim.Optimizer) -> Resumed | None:
    path = newest(directory)
    if path is None:
        return None
    state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return Resumed(int(state["epoch"]), path, int(state.get("step", 0)),
                   int(state.get("steps_per_epoch", 0)))
