"""A checkpoint per epoch in the run's directory on the file system; resume from the newest.

Rank 0 writes ``epoch-NNNN.pt`` atomically (a partial file is never the newest) and keeps the
last ``KEEP``, and the final weights as ``model/final.pt``; every rank reads the newest at
start, so a resubmitted job goes on where its last attempt stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from traingrid_node.metrics import CHECKPOINT_NAME, FINAL_MODEL

KEEP = 3


@dataclass(frozen=True)
class Resumed:
    epoch: int  # epochs already trained
    path: Path


def newest(directory: Path) -> Path | None:
    found = [(int(m.group(1)), p) for p in directory.glob("epoch-*.pt")
             if (m := CHECKPOINT_NAME.fullmatch(p.name))]
    return max(found)[1] if found else None


def save(directory: Path, epoch: int, model: torch.nn.Module,
         optimizer: torch.optim.Optimizer) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"epoch-{epoch:04d}.pt"
    partial = directory / f".{path.name}.partial"
    torch.save({"epoch": epoch, "model": model.state_dict(),
                "optimizer": optimizer.state_dict()}, partial)
    partial.replace(path)
    for old in sorted(directory.glob("epoch-*.pt"))[:-KEEP]:
        old.unlink(missing_ok=True)
    return path


def save_final(output_dir: Path, model: torch.nn.Module) -> Path:
    """The trained weights alone, for whoever serves or fine-tunes the model."""
    path = output_dir / FINAL_MODEL
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    torch.save(model.state_dict(), partial)
    partial.replace(path)
    return path


def resume(directory: Path, model: torch.nn.Module,
           optimizer: torch.optim.Optimizer) -> Resumed | None:
    path = newest(directory)
    if path is None:
        return None
    state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return Resumed(int(state["epoch"]), path)
