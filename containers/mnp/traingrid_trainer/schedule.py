"""The large-batch ImageNet recipe: which optimizer, how long the warmup, which learning rate.

Every rule of it lives here (``recipe`` puts them together) so the trainer, its log line and the
tests read one source:

- **Optimizer.** Plain momentum SGD holds ResNet-50's accuracy up to a global batch of 8k
  (Goyal et al., 2017, "Accurate, Large Minibatch SGD": 76.3% top-1 at 8,192); above that,
  ``auto`` picks LARS (You et al., 2017, "Large Batch Training of Convolutional Networks"),
  the optimizer of the MLPerf ResNet-50 submissions at 32k and more.
- **Learning rate.** SGD: ``base_lr`` (0.1) per 256 images, scaled linearly with the global
  batch and warmed up from ``base_lr`` (Goyal et al.). LARS: the MLPerf reference's rate for the
  global batch (``LARS_PEAK_LR``; the trust ratio, not the batch, sizes each layer's step),
  warmed up from 0. Then the chosen decay to zero (``poly``: power 2, the LARS recipe's;
  ``step``: x0.1 at 30/90, 60/90 and 80/90 of the epochs).
- **Warmup.** Unless the job sets it: none at 256 images or fewer, 5 epochs below 32k (Goyal et
  al. up to 8k, MLPerf's LARS reference to 32k), 25 epochs from 32k on (MLPerf's LARS
  reference), never more than half the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TRUST_COEFFICIENT = 0.001  # LARS's eta (You et al.; the MLPerf reference's default)

DECAY_MODES = ("poly", "cosine", "step", "linear")
OPTIMIZERS = ("auto", "sgd", "lars")
REFERENCE_BATCH = 256
POLY_POWER = 2.0
STEP_MILESTONES = (30 / 90, 60 / 90, 80 / 90)
# Goyal et al.'s largest batch without a loss of accuracy under linear scaling.
LARS_ABOVE = 8192
# (global batch below, LARS peak rate, warmup epochs), from the MLPerf ResNet-50 reference
# (mlcommons/training, image_classification/tensorflow2/lars_util.py).
LARS_TABLE = ((16_384, 10.0, 5), (32_768, 25.0, 5))
LARS_LARGEST = (31.2, 25)  # 32,768 images and more


def choose_optimizer(requested: str, global_batch: int) -> str:
    """``sgd`` or ``lars``: ``auto`` is LARS above ``LARS_ABOVE`` images a step."""
    if requested not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {requested!r}")
    if requested != "auto":
        return requested
    return "lars" if global_batch > LARS_ABOVE else "sgd"


def _lars_row(global_batch: int) -> tuple[float, int]:
    for below, lr, warmup in LARS_TABLE:
        if global_batch < below:
            return lr, warmup
    return LARS_LARGEST


def lars_peak_lr(global_batch: int) -> float:
    return _lars_row(global_batch)[0]


def warmup_epochs_for(global_batch: int, epochs: int) -> int:
    """The warmup a run gets when the job does not set one."""
    warmup = 0 if global_batch <= REFERENCE_BATCH else _lars_row(global_batch)[1]
    return min(warmup, epochs // 2)


@dataclass(frozen=True)
class Schedule:
    base_lr: float  # SGD's rate per REFERENCE_BATCH images
    global_batch: int
    epochs: int
    warmup_epochs: int
    decay_mode: str
    optimizer: str = "sgd"
    lars_lr: float | None = None  # LARS's peak rate; default: the reference's for the batch

    def __post_init__(self) -> None:
        problems = []
        if self.decay_mode not in DECAY_MODES:
            problems.append(f"decay mode must be one of {', '.join(DECAY_MODES)}, "
                            f"got {self.decay_mode!r}")
        if not 0 <= self.warmup_epochs < self.epochs:
            problems.append(f"warmup epochs ({self.warmup_epochs}) must be fewer than "
                            f"epochs ({self.epochs})")
        if self.optimizer not in ("sgd", "lars"):
            problems.append(f"optimizer must be sgd or lars, got {self.optimizer!r}")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def peak_lr(self) -> float:
        if self.optimizer == "lars":
            return self.lars_lr if self.lars_lr is not None else lars_peak_lr(self.global_batch)
        return self.base_lr * self.global_batch / REFERENCE_BATCH

    @property
    def start_lr(self) -> float:
        """Where the warmup starts: SGD from its unscaled rate, LARS from 0."""
        return self.base_lr if self.optimizer == "sgd" else 0.0

    def lr(self, epoch: float) -> float:
        """The rate at a fractional epoch (epoch + step / steps per epoch)."""
        epoch = min(max(epoch, 0.0), float(self.epochs))
        if epoch < self.warmup_epochs:
            return self.start_lr + (self.peak_lr - self.start_lr) * epoch / self.warmup_epochs
        progress = (epoch - self.warmup_epochs) / (self.epochs - self.warmup_epochs)
        if self.decay_mode == "poly":
            return self.peak_lr * (1 - progress) ** POLY_POWER
        if self.decay_mode == "cosine":
            return self.peak_lr * 0.5 * (1 + math.cos(math.pi * progress))
        if self.decay_mode == "linear":
            return self.peak_lr * (1 - progress)
        passed = sum(epoch >= m * self.epochs for m in STEP_MILESTONES)
        return self.peak_lr * 0.1**passed


def recipe(global_batch: int, epochs: int, decay_mode: str, optimizer: str = "auto",
           warmup_epochs: int | None = None, base_lr: float = 0.1,
           lars_lr: float | None = None) -> Schedule:
    """The run's schedule: the optimizer ``auto`` resolves to, and the warmup the job set or
    the rule's."""
    chosen = choose_optimizer(optimizer, global_batch)
    warmup = warmup_epochs_for(global_batch, epochs) if warmup_epochs is None else warmup_epochs
    return Schedule(base_lr, global_batch, epochs, warmup, decay_mode, chosen, lars_lr)
