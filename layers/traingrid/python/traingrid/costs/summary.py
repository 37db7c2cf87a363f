"""What runs cost over a period, grouped: sums of the receipts the runs recorded (TrainingRuns'
and CampaignFanouts')."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from traingrid.costs.receipt import PARTS

GROUPS = ("dataset", "instance_type", "status", "campaign", "pipeline")


def summarize(runs: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """One row per ``by`` value (most expensive first): runs, how many of each pipeline, runs
    recorded without a cost, each part's sum and the total, the plans' estimated maximum, and
    the TrainingRuns' goodput (their productive over their paid node-hours; None without
    any)."""
    if by not in GROUPS:
        raise ValueError(f"cannot group by {by!r}: one of {', '.join(GROUPS)}")
    groups: dict[str, dict[str, Any]] = {}
    for run in runs:
        key = run.get(by) or "-"
        group = groups.setdefault(key, {by: key, "runs": 0, "pipelines": {},
                                        "unpriced_runs": 0,
                                        **{part: Decimal(0) for part in PARTS},
                                        "total": Decimal(0), "estimated_max": Decimal(0),
                                        "paid_node_hours": Decimal(0),
                                        "productive_node_hours": Decimal(0)})
        group["runs"] += 1
        pipeline = run.get("pipeline") or "TrainingRun"
        group["pipelines"][pipeline] = group["pipelines"].get(pipeline, 0) + 1
        actual = run.get("actual")
        if not actual:
            group["unpriced_runs"] += 1
        else:
            for part in (*PARTS, "total"):
                group[part] += Decimal(str(actual.get(part, 0)))
        good = run.get("goodput")
        if isinstance(good, dict):
            for key in ("paid_node_hours", "productive_node_hours"):
                group[key] += Decimal(str(good.get(key) or 0))
        if run.get("estimated_max_usd") is not None:
            group["estimated_max"] += Decimal(str(run["estimated_max_usd"]))
    for group in groups.values():
        paid = group["paid_node_hours"]
        group["goodput"] = round(float(group["productive_node_hours"] / paid), 4) if paid else None
    rows = sorted(groups.values(), key=lambda g: (-g["total"], g[by]))
    return [{k: float(v) if isinstance(v, Decimal) else v for k, v in row.items()}
            for row in rows]
