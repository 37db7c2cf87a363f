"""The learning-rate schedule of large-batch ImageNet training (Goyal et al., 2017).

The base rate is for a global batch of 256 and scales linearly with the real global batch
(ranks x images per rank), so a run on fewer or more GPUs keeps the same per-image step. It
rises linearly from ``base_lr`` to the scaled rate over the warmup epochs, then decays by the
chosen mode to zero (``step``: x0.1 at 30/90, 60/90 and 80/90 of the epochs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DECAY_MODES = ("poly", "cosine", "step", "linear")
REFERENCE_BATCH = 256
POLY_POWER = 2.0
STEP_MILESTONES = (30 / 90, 60 / 90, 80 / 90)


@dataclass(frozen=True)
class Schedule:
    base_lr: float
    global_batch: int
    epochs: int
    warmup_epochs: int
    decay_mode: str

    def __post_init__(self) -> None:
        if self.decay_mode not in DECAY_MODES:
            raise ValueError(f"decay mode must be one of {', '.join(DECAY_MODES)}, "
                             f"got {self.decay_mode!r}")
        if not 0 <= self.warmup_epochs < self.epochs:
            raise ValueError(f"warmup epochs ({self.warmup_epochs}) must be fewer than "
                             f"epochs ({self.epochs})")

    @property
    def peak_lr(self) -> float:
        return self.base_lr * self.global_batch / REFERENCE_BATCH

    def lr(self, epoch: float) -> float:
        """The rate at a fractional epoch (epoch + step / steps per epoch)."""
        epoch = min(max(epoch, 0.0), float(self.epochs))
        if epoch < self.warmup_epochs:
            return self.base_lr + (self.peak_lr - self.base_lr) * epoch / self.warmup_epochs
        progress = (epoch - self.warmup_epochs) / (self.epochs - self.warmup_epochs)
        if self.decay_mode == "poly":
            return self.peak_lr * (1 - progress) ** POLY_POWER
        if self.decay_mode == "cosine":
            return self.peak_lr * 0.5 * (1 + math.cos(math.pi * progress))
        if self.decay_mode == "linear":
            return self.peak_lr * (1 - progress)
        passed = sum(epoch >= m * self.epochs for m in STEP_MILESTONES)
        return self.peak_lr * 0.1**passed
