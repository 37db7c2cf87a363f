"""The optimizers of the recipe (``schedule.py`` says which one a run gets): momentum SGD, and
LARS above 8k images a step, both with weight decay on the convolution and linear weights only.

BatchNorm's scale and shift and the biases are neither decayed nor adapted by LARS: decaying
them costs accuracy (Goyal et al., 2017) and the MLPerf reference LARS skips them (its
``skip_list`` of batch normalization and bias variables).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from traingrid_trainer.schedule import TRUST_COEFFICIENT


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Two groups: the weights of convolutions and linear layers (decayed, adapted by LARS),
    and every one-dimensional parameter, BatchNorm's and the biases (neither)."""
    decayed: list[nn.Parameter] = []
    exempt: list[nn.Parameter] = []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decayed if parameter.ndim > 1 else exempt).append(parameter)
    return [{"params": decayed, "weight_decay": weight_decay, "adapt": True},
            {"params": exempt, "weight_decay": 0.0, "adapt": False}]


class LARS(torch.optim.Optimizer):
    """Layer-wise adaptive rate scaling with momentum, as the MLPerf ResNet-50 reference
    computes it. For each tensor ``w`` of a group with ``adapt``, with gradient ``g``::

        trust = eta * |w| / (|g| + weight_decay * |w| + eps)   (1 if |w| or |g| is 0)
        v     = momentum * v + lr * trust * (g + weight_decay * w)
        w     = w - v

    and without ``adapt``, ``trust`` is 1. The rate is inside the momentum buffer (the
    reference's form), so a change of rate applies from the next step on."""

    def __init__(self, params: Iterable[Any], lr: float, momentum: float = 0.9,
                 weight_decay: float = 0.0, trust_coefficient: float = TRUST_COEFFICIENT,
                 eps: float = 0.0, adapt: bool = True) -> None:
        problems = [f"{name} must be at least 0, got {value}" for name, value in (
            ("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay),
            ("trust_coefficient", trust_coefficient), ("eps", eps)) if value < 0]
        if problems:
            raise ValueError("; ".join(problems))
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay,
                                  "trust_coefficient": trust_coefficient, "eps": eps,
                                  "adapt": adapt})

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            decay = group["weight_decay"]
            for parameter in group["params"]:
                if parameter.grad is None:
                    continue
                grad = parameter.grad
                update = grad.add(parameter, alpha=decay) if decay else grad.clone()
                if group["adapt"]:
                    w_norm = torch.linalg.vector_norm(parameter)
                    g_norm = torch.linalg.vector_norm(grad)
                    trust = group["trust_coefficient"] * w_norm / (
                        g_norm + decay * w_norm + group["eps"])
                    # On the device, without a host sync: 1 where either norm is 0.
                    trust = torch.where((w_norm > 0) & (g_norm > 0), trust,
                                        torch.ones_like(trust))
                    update.mul_(trust * group["lr"])
                else:
                    update.mul_(group["lr"])
                state = self.state[parameter]
                buffer = state.get("momentum_buffer")
                if buffer is None:
                    state["momentum_buffer"] = buffer = update
                else:
                    buffer.mul_(group["momentum"]).add_(update)
                parameter.sub_(buffer)
        return loss


def build_optimizer(name: str, model: nn.Module, lr: float, momentum: float,
                    weight_decay: float,
                    trust_coefficient: float = TRUST_COEFFICIENT) -> torch.optim.Optimizer:
    """``sgd`` or ``lars`` (``schedule.choose_optimizer`` resolves ``auto``) over the model's
    two parameter groups, each group naming the optimizer (saved with it in a checkpoint)."""
    groups = parameter_groups(model, weight_decay)
    for group in groups:
        group["optimizer"] = name
    if name == "lars":
        return LARS(groups, lr=lr, momentum=momentum, trust_coefficient=trust_coefficient)
    if name == "sgd":
        for group in groups:
            del group["adapt"]
        return torch.optim.SGD(groups, lr=lr, momentum=momentum)
    raise ValueError(f"optimizer must be sgd or lars, got {name!r}")


def built_as(optimizer: torch.optim.Optimizer, name: str) -> bool:
    """Whether every group (after a checkpoint's were loaded: the saved ones) is ``name``'s.

    A run that resumes on fewer or more ranks can cross the batch at which ``auto`` changes
    optimizer; the saved groups and momentum then belong to the other one."""
    return all(group.get("optimizer") == name for group in optimizer.param_groups)
