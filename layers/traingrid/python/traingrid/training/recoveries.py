"""What the trainer reports of its in-job recoveries, as node-seconds by cause for the run's
goodput (``costs.goodput``).

The job's ``metrics.json`` (among its outputs; the trainer's contract,
``traingrid_node.metrics``) lists each recovery of that attempt: a worker node lost, the ranks
left restarted by elastic torchrun and gone on from the newest checkpoint. Each says the nodes
before and after, ``recovery_s`` (the last step before the loss to the first one after it:
the collectives' timeout, the re-rendezvous, the checkpoint's load) and ``lost_work_s`` (the
steps since that checkpoint, trained again). The recovery is paid on the nodes left (the lost
one is paid to its loss only: ``costs.node_time``); the lost work on every node the job had.
Pure: tested without AWS.
"""

from __future__ import annotations

import math
from typing import Any

METRICS_FILE = "metrics.json"  # traingrid_node.metrics.METRICS_FILE, the job's side
METRICS_MAX_BYTES = 1024 * 1024


def _seconds(value: Any) -> float | None:
    ok = (isinstance(value, int | float) and not isinstance(value, bool)
          and math.isfinite(value) and value >= 0)
    return float(value) if ok else None


def _nodes(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def phases(document: Any) -> dict[str, int] | None:
    """``{"recovery": …, "lost_work": …}`` node-seconds of the recoveries ``document`` (a
    metrics.json) lists, or None when it lists none it can read."""
    listed = document.get("recoveries") if isinstance(document, dict) else None
    if not isinstance(listed, list):
        return None
    recovery = lost_work = 0.0
    read = 0
    for entry in listed:
        if not isinstance(entry, dict):
            continue
        before, after = _nodes(entry.get("nodes_before")), _nodes(entry.get("nodes_after"))
        took, redone = _seconds(entry.get("recovery_s")), _seconds(entry.get("lost_work_s"))
        if before is None or after is None or took is None or redone is None:
            continue
        recovery += after * took
        lost_work += before * redone
        read += 1
    if not read:
        return None
    return {"recovery": round(recovery), "lost_work": round(lost_work)}
