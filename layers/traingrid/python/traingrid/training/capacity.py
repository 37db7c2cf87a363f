"""Whether AWS has said a queued job will get no capacity, from what AWS reports about it.

A job waits in RUNNABLE while its compute environment's Auto Scaling group launches instances.
When EC2 cannot give them, AWS says so within a minute or two, in three places: the group's
failed scaling activities (EC2's ``InsufficientInstanceCapacity`` or ``VcpuLimitExceeded``
message), the compute environment's ``status``/``statusReason`` (``INVALID``: it cannot scale
at all), and the job's own ``statusReason`` (Batch's ``CAPACITY:`` reasons for a blocked job).
Any of them is a diagnosis: the run need not wait out ``timeouts.runnable_minutes``. A job
RUNNABLE with none of them (the group is still launching) waits as before.

Pure: ``aws.scaling`` reads the descriptions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

# EC2's error codes that mean "not this many of that type now", and the words of their messages
# (a scaling activity's StatusMessage carries the code, then the message).
CAPACITY_CODES = ("InsufficientInstanceCapacity", "VcpuLimitExceeded", "InstanceLimitExceeded",
                  "MaxSpotInstanceCountExceeded")
CAPACITY_PHRASES = {
    "We currently do not have sufficient": "InsufficientInstanceCapacity",
    "You have requested more vCPU capacity than your current vCPU limit": "VcpuLimitExceeded",
    "You have requested more instances": "InstanceLimitExceeded",
}
FAILED_ACTIVITY = ("Failed", "Cancelled")
# Batch names the Auto Scaling group of a managed EC2 compute environment after it.
ASG_SUFFIX = "-asg-"
# Batch's statusReason of a RUNNABLE job it cannot place for want of capacity.
JOB_CAPACITY_PREFIX = "CAPACITY:"


@dataclass(frozen=True)
class Shortage:
    """AWS's word that the job's nodes cannot be had: the code, where it was said, the message."""

    code: str
    source: str
    message: str

    def describe(self) -> str:
        return f"{self.code} ({self.source}): {self.message}"


def capacity_code(message: str) -> str | None:
    """The EC2 capacity error a message reports, if any."""
    for code in CAPACITY_CODES:
        if re.search(rf"\b{code}\b", message):
            return code
    return next((code for phrase, code in CAPACITY_PHRASES.items() if phrase in message), None)


def _epoch_ms(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp() * 1000
    return float(value)


def _ce_name(environment: dict[str, Any]) -> str:
    return str(environment.get("computeEnvironmentName")
               or environment.get("computeEnvironmentArn", "").rsplit("/", 1)[-1])


def diagnose(job: dict[str, Any], environments: list[dict[str, Any]],
             activities: list[dict[str, Any]]) -> Shortage | None:
    """The first sign that ``job`` (a DescribeJobs entry) will not get capacity: a failed
    scaling activity of one of its compute environments' groups since the job was created
    (older ones were another job's), an INVALID compute environment, or the job's reason."""
    created = _epoch_ms(job.get("createdAt")) or 0.0
    names = {_ce_name(e) for e in environments}
    for activity in activities:
        group = str(activity.get("AutoScalingGroupName", ""))
        if (activity.get("StatusCode") not in FAILED_ACTIVITY
                or not any(group.startswith(name + ASG_SUFFIX) for name in names)
                or (_epoch_ms(activity.get("StartTime")) or 0.0) < created):
            continue
        message = str(activity.get("StatusMessage") or "")
        if code := capacity_code(message):
            return Shortage(code, f"scaling activity of Auto Scaling group {group}", message)
    for environment in environments:
        if environment.get("status") == "INVALID":
            return Shortage("ComputeEnvironmentInvalid",
                            f"compute environment {_ce_name(environment)}",
                            environment.get("statusReason") or "no reason given")
    reason = str(job.get("statusReason") or "")
    if reason.startswith(JOB_CAPACITY_PREFIX):
        return Shortage(reason.split(" ", 1)[0].removesuffix(":"), "the job's status reason",
                        reason)
    return None
