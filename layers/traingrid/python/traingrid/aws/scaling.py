"""What AWS reports about getting a queue's instances: its compute environments and the recent
scaling activities of their Auto Scaling groups (read by ``training.capacity``)."""

from __future__ import annotations

from typing import Any

from traingrid.aws.client_errors import translated
from traingrid.aws.clients import client

# The newest activities are enough: those of the last few minutes are what a job just queued
# can have caused (DescribeScalingActivities lists newest first).
ACTIVITIES = 100


def compute_environments(job_queue: str) -> list[dict[str, Any]]:
    """The compute environments of a job queue (name or ARN), described."""
    with translated("Batch", "DescribeJobQueues"):
        queues = client("batch").describe_job_queues(jobQueues=[job_queue])["jobQueues"]
    arns = [entry["computeEnvironment"] for queue in queues
            for entry in queue.get("computeEnvironmentOrder", [])]
    if not arns:
        return []
    with translated("Batch", "DescribeComputeEnvironments"):
        return list(client("batch").describe_compute_environments(
            computeEnvironments=arns)["computeEnvironments"])


def scaling_activities() -> list[dict[str, Any]]:
    """The account's newest Auto Scaling activities in this region (Batch does not name its
    groups in the compute environment; their names start with the environment's)."""
    with translated("AutoScaling", "DescribeScalingActivities"):
        return list(client("autoscaling").describe_scaling_activities(
            MaxRecords=ACTIVITIES)["Activities"])
