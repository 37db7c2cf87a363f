"""Scheduled jobs, fired by hand in the emulator (``traingrid tick``).

EventBridge schedules never fire in the emulator, so ``tick`` does what the schedule's rule
does: it invokes the job's deployed function with a "Scheduled Event", the event EventBridge
sends, ``time`` being the scheduled time. A new scheduled function is one more entry in
``SCHEDULED_JOBS``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from traingrid.clock import iso
from traingrid_local.emulator.deploy import Stack
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator


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
}


class JobFailed(RuntimeError):
    pass


def scheduled_event(rule_arn: str, at: datetime, region: str) -> dict[str, Any]:
    """The event an EventBridge schedule rule sends its target."""
    return {
        "version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event",
        "source": "aws.events", "account": ACCOUNT_ID, "time": iso(at), "region": region,
        "resources": [rule_arn], "detail": {},
    }


def fire(emulator: Emulator, stack: Stack, name: str, at: datetime) -> dict[str, Any]:
    """Invoke the job's deployed function as its schedule would at ``at``; its result."""
    job = SCHEDULED_JOBS[name]
    rule = stack.resources[f"{job.function}{job.event}"]
    rule_arn = f"arn:aws:events:{emulator.region}:{ACCOUNT_ID}:rule/{rule}"
    response = emulator.client("lambda").invoke(
        FunctionName=stack.resources[job.function],
        Payload=json.dumps(scheduled_event(rule_arn, at, emulator.region)).encode())
    payload = json.loads(response["Payload"].read())
    if "FunctionError" in response:
        raise JobFailed(f"{name}: {payload.get('errorType')}: {payload.get('errorMessage')}")
    return payload
