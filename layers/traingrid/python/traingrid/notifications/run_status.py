"""Run-status events: every TrainingRun, CampaignFanout and fan-out region job tells the
account's default EventBridge bus where it stands, as ``TrainGrid Run Status Change`` events
of source ``traingrid`` (their detail: ``schema/events/run-status-change.json``), so that a
rule can route them to a chat, a pager or an SNS topic ([observability.md]).

Published by the steps that change a run's status: the TrainingRun's Plan (RUNNING) and
RecordRun (how it ended); the fan-out's PlanFanout (RUNNING), RecordRegionJob (each region's
job, as it ended) and FinishFanout (how the fan-out ended). EventBridge delivers at least once,
and a retried step publishes again: a consumer keys on ``(execution_arn, kind, region,
status)``. A failure to publish is logged and counted (``RunStatusEventsFailed``), never
failing the run it reports on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from traingrid import clock
from traingrid.aws import events
from traingrid.observability import logger, metrics

SOURCE = "traingrid"
DETAIL_TYPE = "TrainGrid Run Status Change"
SCHEMA_VERSION = "1"
KINDS = ("TrainingRun", "CampaignFanout", "RegionJob")
# A cause is cut to this many characters: an event stays far below EventBridge's 256 KB.
MAX_CAUSE = 4096


def console_url(execution_arn: str) -> str:
    parts = execution_arn.split(":")
    region = parts[3] if len(parts) > 3 and parts[3] else "us-east-1"
    return (f"https://{region}.console.aws.amazon.com/states/home?region={region}"
            f"#/v2/executions/details/{execution_arn}")


def change(kind: str, execution_arn: str, status: str, **facts: Any) -> dict[str, Any]:
    """One event's detail: the run (its execution's name and ARN), what changed and when, and
    the facts given (``campaign``, ``region``, ``dataset``, ``error``, ``cause``…) that are
    not None."""
    if kind not in KINDS:
        raise ValueError(f"no kind {kind!r}: one of {', '.join(KINDS)}")
    if isinstance(facts.get("cause"), str) and len(facts["cause"]) > MAX_CAUSE:
        facts["cause"] = facts["cause"][:MAX_CAUSE - 1] + "…"
    return {"version": SCHEMA_VERSION, "kind": kind, "name": execution_arn.rsplit(":", 1)[-1],
            "execution_arn": execution_arn, "status": str(status),
            "time": clock.iso(clock.now()), "console_url": console_url(execution_arn),
            **{k: v for k, v in facts.items() if v is not None}}


def publish(changes: Sequence[dict[str, Any]]) -> int:
    """Put the changes on the default bus; how many were published (0 if it failed)."""
    details = [(detail, [detail["execution_arn"], *([detail["job_arn"]]
                                                   if detail.get("job_arn") else [])])
               for detail in changes]
    try:
        sent = events.put(SOURCE, DETAIL_TYPE, details)
    except Exception:  # noqa: BLE001 - a notification never fails the run it reports on
        logger.exception("run-status events not published",
                         extra={"events": [(d["kind"], d["status"]) for d in changes]})
        metrics.add_metric(name="RunStatusEventsFailed", unit="Count", value=len(changes))
        return 0
    metrics.add_metric(name="RunStatusEvents", unit="Count", value=sent)
    return sent
