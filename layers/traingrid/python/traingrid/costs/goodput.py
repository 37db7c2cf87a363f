"""A run's goodput: productive node-hours / paid node-hours, and where the rest went.

Paid node-hours are the receipt's compute node-hours: each attempt's nodes × its wait in
RUNNABLE/STARTING, and its nodes' Batch running time (a worker node lost mid-job paid to its
loss: ``costs.node_time``). What was not productive, by cause:

- ``queue``: the wait from SubmitJob to the job's start (Batch ``createdAt`` → ``startedAt``):
  the compute environment launching the instances, booting them and pulling the image;
- ``boot``: a node's boot past the queue, where the job reports it (Batch's timestamps put an
  instance's boot inside the queue: 0 unless reported);
- ``hydration``: the job's own read of its data before training, where reported (the file
  system's hydration before SubmitJob holds no nodes: its cost is on the file-system line);
- ``preflight``: an attempt that the trainer's pre-flight check ended (exit 75) before training;
- ``lost_work``: a failed attempt's running time (training on nodes that did not finish: the
  steps its checkpoints saved are not reported to the run, so none are subtracted), and in a
  job that recovered from a lost worker node, the steps since the checkpoint it went on from,
  on every node it had then (the trainer reports them: ``training.recoveries``);
- ``recovery``: in-job recovery after a lost worker node, on the nodes left (from the last
  step before the loss to the first step after it: the collectives' timeout, the
  re-rendezvous, the checkpoint's load), as the trainer reports it;
- ``export``: the export to S3 runs after the job, on the file system alone: 0 node-hours (its
  time is on the file-system line).

Pure: tested without AWS.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

CAUSES = ("queue", "boot", "hydration", "preflight", "lost_work", "recovery", "export")
PREFLIGHT_OUTCOME = "exit 75"  # training.attempts.EXIT_PREFLIGHT, as classify words it


class AttemptTime(Protocol):
    """An attempt's nodes and times (``costs.receipt.AttemptUse``); ``phases`` in
    node-seconds."""

    @property
    def nodes(self) -> int: ...
    @property
    def seconds(self) -> int: ...
    @property
    def waited_s(self) -> int: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def phases(self) -> dict[str, int]: ...
    @property
    def running_node_s(self) -> int: ...


def _hours(node_seconds: float) -> float:
    return round(node_seconds / 3600, 6)


def goodput(attempts: Iterable[AttemptTime]) -> dict[str, Any]:
    """Productive and paid node-hours of the ``attempts`` (``costs.receipt.AttemptUse``), their
    ratio (None before any node was paid for) and the unproductive node-hours by cause."""
    lost = dict.fromkeys(CAUSES, 0.0)
    paid = 0.0
    for a in attempts:
        paid += a.nodes * a.waited_s + a.running_node_s
        lost["queue"] += a.nodes * a.waited_s
        ran = float(a.running_node_s)
        if a.outcome is not None and a.outcome.startswith(PREFLIGHT_OUTCOME):
            lost["preflight"] += ran
            continue
        if a.outcome is not None:  # failed: none of its running time is kept
            lost["lost_work"] += ran
            continue
        for cause in ("boot", "hydration", "preflight", "lost_work", "recovery"):
            share = min(float(a.phases.get(cause, 0)), ran)
            lost[cause] += share
            ran -= share
    unproductive = sum(lost.values())
    productive = max(paid - unproductive, 0.0)
    return {"paid_node_hours": _hours(paid), "productive_node_hours": _hours(productive),
            "goodput": round(productive / paid, 4) if paid else None,
            "lost_node_hours": {cause: _hours(s) for cause, s in lost.items()}}
