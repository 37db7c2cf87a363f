"""Adaptation (moto 5.2.5): the Auto Scaling activities that tell a queued job has no capacity.

moto's DescribeScalingActivities always answers an empty list, and its Batch compute
environments have no Auto Scaling group. On AWS, a managed EC2 compute environment launches its
instances through a group named ``<environment>-asg-<id>``; when EC2 cannot give them, the
group's activity fails with EC2's message. Here, a job that cannot be placed for want of
capacity (``stuck-runnable``, or more than ``capacity-8-nodes`` allows) gets one failed activity
of the group of its queue's first compute environment that launches its type,
ACTIVITY_AFTER_S after it becomes RUNNABLE, worded as EC2 words InsufficientInstanceCapacity
(VcpuLimitExceeded under ``vcpu-quota``). A job that waits for another reason (more memory
than a node registers) gets none, as on AWS, where the group launches its instances.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from moto.autoscaling.responses import AutoScalingResponse
from moto.core.responses import ActionResult

from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.patching import PATCHES

# EC2 answers a launch within a minute or so; the group records the failure then.
ACTIVITY_AFTER_S = 60
INSUFFICIENT_CAPACITY = (
    "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not "
    "have sufficient {instance_type} capacity in the Availability Zone you requested ({zone}). "
    "Our system will be working on provisioning additional capacity. You can currently get "
    "{instance_type} capacity by not specifying an Availability Zone in your request or "
    "choosing {others}. Launching EC2 instance failed."
)
VCPU_LIMIT = (
    "Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more vCPU "
    "capacity than your current vCPU limit of {limit} allows for the instance bucket that the "
    "specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request "
    "to request an adjustment to this limit. Launching EC2 instance failed."
)


@dataclass(frozen=True)
class Activity:
    account: str
    region: str
    group: str
    at: datetime
    message: str
    desired: int

    def describe(self) -> dict[str, Any]:
        return {
            "ActivityId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.group}/{self.at}")),
            "AutoScalingGroupName": self.group,
            "Description": f"Launching a new EC2 instance.  Status Reason: {self.message}",
            "Cause": (f"At {self.at:%Y-%m-%dT%H:%M:%SZ} a user request update of "
                      f"AutoScalingGroup constraints to min: 0, max: {self.desired}, desired: "
                      f"{self.desired} changing the desired capacity from 0 to "
                      f"{self.desired}."),
            "StartTime": self.at,
            "EndTime": self.at,
            "StatusCode": "Failed",
            "StatusMessage": self.message,
            "Progress": 100,
        }


ACTIVITIES: list[Activity] = []
_LOCK = threading.Lock()
_GROUPS: dict[str, str] = {}  # compute environment ARN → its group's name


def group_name(environment: Any) -> str:
    """The compute environment's Auto Scaling group, named as Batch names it."""
    with _LOCK:
        return _GROUPS.setdefault(environment.arn,
                                  f"{environment.name}-asg-{uuid.uuid4()}")


def no_capacity(job: Any, runnable_at: datetime, instance_type: str | None, nodes: int,
                vcpu_limit: int | None = None) -> None:
    """Record the failed launch for ``job`` (a moto Batch job) that EC2 will not place:
    InsufficientInstanceCapacity, or VcpuLimitExceeded under a vCPU quota."""
    environments = job.job_queue.environments
    if not environments:
        return
    # The queue's first environment that launches the type (EFA types have their own).
    environment = next((e for e in environments
                        if instance_type in (e.compute_resources.get("instanceTypes") or [])),
                       environments[0])
    region = job.backend.region_name
    instance_type = instance_type or (
        environment.compute_resources.get("instanceTypes") or ["the requested type"])[0]
    zones = [f"{region}{z}" for z in "abcdf"]
    message = (VCPU_LIMIT.format(limit=vcpu_limit) if vcpu_limit is not None else
               INSUFFICIENT_CAPACITY.format(instance_type=instance_type, zone=zones[0],
                                            others=", ".join(zones[1:])))
    activity = Activity(job.backend.account_id, region, group_name(environment),
                        runnable_at + timedelta(seconds=ACTIVITY_AFTER_S), message, nodes)
    with _LOCK:
        ACTIVITIES.append(activity)


def reset() -> None:
    with _LOCK:
        ACTIVITIES.clear()
        _GROUPS.clear()


def _describe_scaling_activities(self: AutoScalingResponse) -> ActionResult:
    group = self._get_param("AutoScalingGroupName")
    limit = int(self._get_param("MaxRecords") or 100)
    now = CLOCK.now()
    with _LOCK:
        found = [a for a in ACTIVITIES
                 if a.account == self.current_account and a.region == self.region
                 and a.at <= now and group in (None, a.group)]
    found.sort(key=lambda a: a.at, reverse=True)  # newest first, as AWS lists them
    return ActionResult({"Activities": [a.describe() for a in found[:limit]]})


def apply() -> None:
    PATCHES.replace(AutoScalingResponse, "describe_scaling_activities",
                    _describe_scaling_activities)
