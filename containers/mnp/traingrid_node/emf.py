"""The trainer's metrics as CloudWatch's embedded metric format (EMF): one JSON object per
line on stdout, which the job's log driver sends to its CloudWatch Logs stream, where
CloudWatch extracts them as metrics of namespace ``TrainGrid`` (no agent, no API call).

Following the specification ("Specification: Embedded metric format", CloudWatch User Guide):
the log event is one JSON object with nothing before or after it; its root holds ``_aws``
(``Timestamp``: milliseconds since the epoch; ``CloudWatchMetrics``: one MetricDirective of
``Namespace``, ``Dimensions`` (an array of dimension sets, each an array of at most 30 names of
string members of the root) and ``Metrics`` (at most 100 of ``{Name, Unit}``, each Name a
member of the root holding a number)); the dimensions' values are strings.

Every node's first local rank writes, with dimensions ``run`` (the run's name) and ``node`` (its
host), and again per ``run`` alone (summed or averaged across nodes):

- each logged window of steps: ``ImagesPerSecond`` (this node's), ``StepTime``, ``Loss``,
  ``LearningRate``;
- every ``HEARTBEAT_S`` while training, from a thread of its own (it goes on when the steps
  stop): ``StepsCompleted`` since the last heartbeat (0 when stuck) and ``StalledSeconds``
  since the last step. The stack's alarm watches each run's largest ``StalledSeconds``, a
  contributor of its own: any job can print such a line for any run (docs/observability.md).

Standard library only: the trainer imports it; the node's tests check it against the spec.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

NAMESPACE = "TrainGrid"
DIMENSIONS = [["run", "node"], ["run"]]
# CloudWatch's units (MetricDatum.Unit), one per metric the trainer writes.
UNITS = {
    "ImagesPerSecond": "Count/Second",
    "StepTime": "Seconds",
    "Loss": "None",
    "LearningRate": "None",
    "StepsCompleted": "Count",
    "StalledSeconds": "Seconds",
}
HEARTBEAT_S = 60.0
# Names CloudWatch keeps as a dimension value: at most 1024 characters (Dimension.Value).
MAX_DIMENSION_VALUE = 1024


def document(values: Mapping[str, float], run: str, node: str, at_ms: int) -> dict[str, Any]:
    """One EMF document of ``values`` (metric name → number) for ``run`` on ``node``."""
    unknown = sorted(set(values) - set(UNITS))
    if unknown:
        raise ValueError(f"no unit for {', '.join(unknown)}")
    return {
        "_aws": {"Timestamp": int(at_ms), "CloudWatchMetrics": [{
            "Namespace": NAMESPACE, "Dimensions": DIMENSIONS,
            "Metrics": [{"Name": name, "Unit": UNITS[name]} for name in values]}]},
        "run": run[:MAX_DIMENSION_VALUE], "node": node[:MAX_DIMENSION_VALUE],
        **{name: float(value) for name, value in values.items()},
    }


def line(values: Mapping[str, float], run: str, node: str, at_ms: int) -> str:
    return json.dumps(document(values, run, node, at_ms), separators=(",", ":"))


def node_name(env: Mapping[str, str]) -> str:
    """SageMaker's host name (``algo-1``) where there is one, otherwise the host's."""
    return env.get("SM_CURRENT_HOST") or socket.gethostname()


class Reporter:
    """Writes a node's EMF lines: windows as they are logged, heartbeats from a thread."""

    def __init__(self, run: str, node: str, out: TextIO | None = None,
                 heartbeat_s: float = HEARTBEAT_S, ranks: int = 1,
                 clock: Callable[[], float] = time.time) -> None:
        self.run, self.node, self.heartbeat_s, self.clock = run, node, heartbeat_s, clock
        self.ranks = ranks  # this node's ranks: each trains a batch per step
        self.out = out if out is not None else sys.stdout
        self._lock = threading.Lock()
        self._steps = 0  # since the last heartbeat
        self._last_step = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _write(self, values: Mapping[str, float]) -> None:
        text = line(values, self.run, self.node, int(self.clock() * 1000))
        with self._lock:
            print(text, file=self.out, flush=True)

    def window(self, steps: int, seconds: float, batch: int, loss: float, lr: float) -> None:
        """A logged window: ``steps`` steps of ``batch`` images per rank in ``seconds``."""
        images = steps * batch * self.ranks
        with self._lock:
            self._steps += steps
            self._last_step = self.clock()
        self._write({"ImagesPerSecond": images / seconds if seconds > 0 else 0.0,
                     "StepTime": seconds / steps if steps else 0.0,
                     "Loss": loss, "LearningRate": lr})

    def heartbeat(self) -> None:
        with self._lock:
            steps, self._steps = self._steps, 0
            stalled = max(0.0, self.clock() - self._last_step)
        self._write({"StepsCompleted": steps, "StalledSeconds": stalled})

    def start(self) -> Reporter:
        self._last_step = self.clock()

        def beat() -> None:
            while not self._stop.wait(self.heartbeat_s):
                self.heartbeat()

        self._thread = threading.Thread(target=beat, name="emf-heartbeat", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """The last heartbeat (the steps since the one before), then no more."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.heartbeat()


def reporter(env: Mapping[str, str] | None = None, local_rank: int = 0) -> Reporter | None:
    """The node's reporter: on its first local rank, unless ``TRAINGRID_EMF`` is ``0``."""
    env = os.environ if env is None else env
    if local_rank != 0 or env.get("TRAINGRID_EMF", "1").strip() == "0":
        return None
    ranks = env.get("OMPI_COMM_WORLD_LOCAL_SIZE") or env.get("LOCAL_WORLD_SIZE") or "1"
    return Reporter(env.get("TRAINGRID_RUN") or "traingrid", node_name(env),
                    ranks=int(ranks) if ranks.isdigit() and int(ranks) > 0 else 1)


def started(env: Mapping[str, str] | None = None, local_rank: int = 0) -> Reporter | None:
    """The node's reporter, its heartbeat started (None where this rank writes none)."""
    found = reporter(env, local_rank)
    return found.start() if found is not None else None


def stop(found: Reporter | None) -> None:
    if found is not None:
        found.stop()
