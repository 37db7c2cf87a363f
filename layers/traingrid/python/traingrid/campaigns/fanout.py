"""Decisions of one region's branch of the fan-out: poll, succeed, fail, or move on.

Capacity and quota errors are not the job's fault: the branch tries the plan's next acceptable
region. Anything else ends the branch with the service's reason.
"""

from __future__ import annotations

from typing import Any

from traingrid.campaigns.model import Move, RegionJob, RegionJobCheck, RegionJobStatus
from traingrid.training.waits import Backoff, Poll

SAGEMAKER_BACKOFF = Backoff(first_s=60, factor=1.5, max_s=600)
CAPACITY_REASONS = ("CapacityError", "InsufficientCapacity", "ResourceLimitExceeded")


def is_capacity_problem(reason: str) -> bool:
    return reason.startswith(CAPACITY_REASONS) or any(r in reason for r in CAPACITY_REASONS)


def check(description: dict[str, Any], poll: Poll) -> RegionJobCheck:
    """Next state of a region's poll loop from DescribeTrainingJob."""
    status = description["TrainingJobStatus"]
    reason = description.get("FailureReason", "")
    if status == RegionJobStatus.FAILED and is_capacity_problem(reason):
        status = RegionJobStatus.CAPACITY_UNAVAILABLE.value
    out = RegionJobCheck(status=status, secondary_status=description.get("SecondaryStatus"),
                         poll=poll.advance(SAGEMAKER_BACKOFF).state())
    if reason:
        out["reason"] = reason
    if artifacts := description.get("ModelArtifacts", {}).get("S3ModelArtifacts"):
        out["artifacts"] = artifacts
    return out


def next_region(job: RegionJob, reason: str) -> RegionJob:
    """Move the branch to the plan's next acceptable region, or give up saying why."""
    tried: list[Move] = [*job.get("tried", []), {"region": job["region"], "reason": reason}]
    remaining = [r for r in job.get("fallbacks", []) if r not in {t["region"] for t in tried}]
    moved: RegionJob = {**job, "tried": tried, "attempt": int(job.get("attempt", 1)) + 1}
    if not remaining:
        regions = ", ".join(t["region"] for t in tried)
        moved["status"] = RegionJobStatus.FAILED.value
        moved["reason"] = (f"No capacity for {job['instance_count']} × {job['instance_type']} "
                           f"in any acceptable region (tried {regions}); last: {reason}")
        return moved
    moved["region"] = remaining[0]
    moved["status"] = RegionJobStatus.MOVING.value
    moved["reason"] = f"{job['region']}: {reason}; trying {remaining[0]}"
    return moved
