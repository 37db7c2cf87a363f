"""Named faults the emulator can inject, so every failure path runs for real.

The SageMaker faults act in one region only, the plan's ``fault_region``: the same account sees
the failure there and healthy training elsewhere, as when one region runs out of capacity.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

FAULTS: dict[str, str] = {
    "fsx-create-failed": "the file system goes FAILED while hydrating",
    "batch-job-failed": "the training job's main node exits non-zero",
    "stuck-runnable": "the training job never leaves RUNNABLE (no capacity)",
    "export-failed": "the archive export task FAILS",
    "throttling": "the first calls of every FSx and Batch operation are throttled",
    "lost-events": "Batch job state-change events are never delivered",
    "sagemaker-capacity": "SageMaker jobs in the fault region fail Starting: no ML capacity",
    "sagemaker-job-failed": "SageMaker jobs in the fault region fail Training: mpirun exits 1",
    "sagemaker-quota": "CreateTrainingJob in the fault region hits ResourceLimitExceeded",
}


@dataclass
class FaultPlan:
    """Which faults are on, where the regional ones act, and counters for the ones that act a
    limited number of times."""

    active: frozenset[str] = frozenset()
    throttle_first_calls: int = 2
    fault_region: str = "us-west-2"
    _calls: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        unknown = set(self.active) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault(s) {sorted(unknown)}; known: {sorted(FAULTS)}")

    def on(self, name: str) -> bool:
        return name in self.active

    def on_in_region(self, name: str, region: str) -> bool:
        """True if ``name`` is on and ``region`` is the plan's fault region."""
        return self.on(name) and region == self.fault_region

    def should_throttle(self, operation: str) -> bool:
        """True for the first ``throttle_first_calls`` calls of ``operation``."""
        if "throttling" not in self.active:
            return False
        with self._lock:
            self._calls[operation] += 1
            return self._calls[operation] <= self.throttle_first_calls

    def throttled_calls(self) -> int:
        with self._lock:
            return sum(min(n, self.throttle_first_calls) for n in self._calls.values())


# The emulator's current plan; replaced for each emulator session.
CURRENT = FaultPlan()


def set_plan(plan: FaultPlan) -> None:
    global CURRENT
    CURRENT = plan
