"""Named faults the emulator can inject, so every failure path runs for real.

The SageMaker faults act in one region only, the plan's ``fault_region``: the same account sees
the failure there and healthy training elsewhere, as when one region runs out of capacity.

State faults act at one Task state of a state machine, whatever it calls
(:mod:`traingrid_local.emulator.sfn_faults`): ``{"CreateFileSystem": StateFault("abort")}``.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

FAULTS: dict[str, str] = {
    "fsx-create-failed": "the file system goes FAILED while hydrating",
    "batch-job-failed": "the training job's main node exits non-zero",
    "node-lost": "the first training job of each run loses its main node's host: no exit, no "
                 "export on exit (its checkpoints reached S3 as they were written)",
    "node-lost-every-attempt": "every training job loses its main node's host, as node-lost",
    "worker-lost": "the first training job of each run loses a worker node's host: the job "
                   "goes on RUNNING on the others and ends on fewer nodes, in one attempt",
    "hung-job": "the first training job of each run stops stepping: the trainer's watchdog "
                "ends it, exit 71",
    "slow-node": "the first training job of each run has a node far below the others: the "
                 "trainer's pre-flight check names it and the job exits 75 before training",
    "straggler": "one node of every training job reads its data at 70% of the others' pace, "
                 "above the pre-flight check's floor: the job trains at its pace, and its curves "
                 "show it waiting for its input",
    "capacity-8-nodes": "no more than 8 nodes can be had: a job asking for more stays RUNNABLE",
    "stuck-runnable": "the training job never leaves RUNNABLE (no capacity)",
    "vcpu-quota": "the account's vCPU limit is 512: a job asking for more vCPUs stays RUNNABLE "
                  "and its compute environment's launch fails VcpuLimitExceeded",
    "export-failed": "S3 refuses the file system's exports: on the job's exit and the export task",
    "throttling": "the first calls of every FSx and Batch operation are throttled",
    "lost-events": "Batch job state-change events are never delivered",
    "sagemaker-capacity": "SageMaker jobs in the fault region fail Starting: no ML capacity",
    "sagemaker-capacity-5": "SageMaker jobs of more than 5 instances in the fault region fail "
                            "Starting: no ML capacity for them",
    "sagemaker-job-failed": "SageMaker jobs in the fault region fail Training: mpirun exits 1",
    "sagemaker-quota": "CreateTrainingJob in the fault region hits ResourceLimitExceeded",
}

STATE_FAULTS: dict[str, str] = {
    "service-error": "the step's call fails with an error its retries do not absorb",
    "throttling-storm": "every call the step makes is throttled, longer than its retries last",
    "timeout": "the step does not answer in time (a Lambda step: its function times out)",
    "abort": "the execution is stopped (StopExecution) while it is in the step",
}


@dataclass(frozen=True)
class StateFault:
    """A fault at one Task state. ``after_s`` (abort only): simulated seconds into the state
    before the execution is stopped, e.g. to stop a run while its training job runs."""

    kind: str
    after_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in STATE_FAULTS:
            raise ValueError(f"unknown state fault {self.kind!r}; known: {sorted(STATE_FAULTS)}")
        if self.after_s < 0 or (self.after_s and self.kind != "abort"):
            raise ValueError(f"after_s must be 0, or positive for an abort, not {self.after_s}")


@dataclass
class FaultPlan:
    """Which faults are on, where the regional ones act, and counters for the ones that act a
    limited number of times."""

    active: frozenset[str] = frozenset()
    throttle_first_calls: int = 2
    fault_region: str = "us-west-2"
    at_states: Mapping[str, StateFault] = field(default_factory=dict)
    _calls: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _aborted: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        unknown = set(self.active) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault(s) {sorted(unknown)}; known: {sorted(FAULTS)}")
        for state, fault in self.at_states.items():
            if not isinstance(fault, StateFault):
                raise ValueError(f"the fault at {state!r} must be a StateFault, not {fault!r}")

    def at_state(self, state: str) -> StateFault | None:
        """The fault at the Task state of that name, if any."""
        return self.at_states.get(state)

    def first_abort(self, execution_arn: str) -> bool:
        """True the first time an execution reaches its abort (a stop comes once)."""
        with self._lock:
            if execution_arn in self._aborted:
                return False
            self._aborted.add(execution_arn)
            return True

    def on(self, name: str) -> bool:
        return name in self.active

    def first_time(self, name: str, key: str) -> bool:
        """True the first time it is asked for this fault and key (e.g. a run's first job)."""
        with self._lock:
            self._calls[f"{name}:{key}"] += 1
            return self._calls[f"{name}:{key}"] == 1

    def first_job_of(self, name: str, run: str) -> bool:
        """Whether fault ``name`` is on and this is the first job of ``run`` it is asked for."""
        return self.on(name) and self.first_time(name, run)

    def loses_host(self, run: str) -> bool:
        """Whether a job of ``run`` loses its main node's host (node-lost: its first job;
        node-lost-every-attempt: every job)."""
        return (self.on("node-lost-every-attempt")
                or (self.on("node-lost") and self.first_time("node-lost", run)))

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


# The emulator's current plan: none but in an emulator session.
CURRENT = FaultPlan()


def set_plan(plan: FaultPlan) -> None:
    """The session's plan from now on (through the patches: the session's close puts back the
    empty one)."""
    # Here, not at the top: the CLI reads FAULTS from this module without importing moto.
    from traingrid_local.emulator.patching import PATCHES

    PATCHES.replace(sys.modules[__name__], "CURRENT", plan)
