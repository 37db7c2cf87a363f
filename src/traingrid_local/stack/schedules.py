"""Scheduled jobs, fired by hand in the emulator (``traingrid tick``).

EventBridge schedules never fire in the emulator, so ``tick`` does what the schedule's rule
does: it invokes the job's deployed function with a "Scheduled Event", the event EventBridge
sends, whose ``time`` is the scheduled time: by default the time the rule's schedule last came
due. Ticking twice is the schedule firing twice for the same time. A new scheduled function is
one more entry in ``SCHEDULED_JOBS``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from traingrid.clock import iso, parse_iso
from traingrid_local.stack.cron_expression import last_due

if TYPE_CHECKING:  # `traingrid tick` reads the jobs' names without loading the emulator
    from traingrid_local.emulator.deploy import Stack
    from traingrid_local.emulator.session import Emulator


@dataclass(frozen=True)
class ScheduledJob:
    function: str  # the function's logical id
    event: str  # its Schedule event's name in template.yaml
    what: str


SCHEDULED_JOBS = {
    "retrain": ScheduledJob(
        "RetrainCampaignsFunction", "Retrain",
        "scheduled retraining: one fan-out per campaign with data registered since its last "
        "successful run"),
    "janitor": ScheduledJob(
        "JanitorFunction", "Sweep",
        "the janitor: releases the file systems, Batch jobs and SageMaker jobs that ended runs "
        "left behind"),
}
# The route of `traingrid serve`'s server that fires them.
TICK_PATH = "/_emulator/tick"


class JobFailed(RuntimeError):
    pass


def scheduled_event(rule_arn: str, at: datetime, region: str) -> dict[str, Any]:
    """The event an EventBridge schedule rule sends its target."""
    return {
        "version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event",
        "source": "aws.events", "account": rule_arn.split(":")[4],  # the rule's account
        "time": iso(at), "region": region,
        "resources": [rule_arn], "detail": {},
    }


def fire(emulator: Emulator, stack: Stack, name: str,
         at: datetime | None = None) -> dict[str, Any]:
    """Invoke the job's deployed function as its schedule does for the time ``at`` (default:
    when the schedule last came due on the emulator's clock); the function's result, with
    the schedule and the time."""
    job = SCHEDULED_JOBS[name]
    rule = stack.resources[f"{job.function}{job.event}"]
    described = emulator.client("events").describe_rule(Name=rule)
    schedule = described["ScheduleExpression"]
    if at is None:
        at = last_due(schedule, parse_iso(emulator.now_iso()))
    response = emulator.client("lambda").invoke(
        FunctionName=stack.resources[job.function],
        Payload=json.dumps(scheduled_event(described["Arn"], at, emulator.region)).encode())
    payload = json.loads(response["Payload"].read())
    if "FunctionError" in response:
        raise JobFailed(f"{name}: {payload.get('errorType')}: {payload.get('errorMessage')}")
    return {"schedule": schedule, "scheduled_at": iso(at), **payload}
