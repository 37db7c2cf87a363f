"""Decisions of one region's branch of the fan-out: poll, succeed, fail, or move on.

Capacity and quota errors are not the job's fault: the branch first tries the same region with
half the instances (never fewer than the campaign's ``min_instance_count``), then the plan's next
acceptable region with the instances asked for. Anything else ends the branch with the
service's reason.
"""

from __future__ import annotations

from typing import Any

from traingrid.training.attempts import shrunk
from traingrid.training.waits import Backoff, Poll
from traingrid.vocabulary.campaign_fanout import Move, RegionJob, RegionJobCheck, RegionJobStatus

# The region's wait ends on SageMaker's event; without one for this long, the job is checked
# anyway (a lost event costs at most this): 20 checks over a 5-day job, not 720.
EVENT_FALLBACK_S = 6 * 3600
SAGEMAKER_BACKOFF = Backoff(first_s=EVENT_FALLBACK_S, factor=1, max_s=EVENT_FALLBACK_S)
CAPACITY_REASONS = ("CapacityError", "InsufficientCapacity", "ResourceLimitExceeded")


def is_capacity_problem(reason: str) -> bool:
    return reason.startswith(CAPACITY_REASONS) or any(r in reason for r in CAPACITY_REASONS)


def check(description: dict[str, Any], poll: Poll) -> RegionJobCheck:
    """Next state of a region's wait from DescribeTrainingJob (after each wake-up)."""
    status = RegionJobStatus(description["TrainingJobStatus"])
    reason = description.get("FailureReason", "")
    if status == RegionJobStatus.FAILED and is_capacity_problem(reason):
        status = RegionJobStatus.CAPACITY_UNAVAILABLE
    out = RegionJobCheck(status=status, secondary_status=description.get("SecondaryStatus"),
                         poll=poll.advance(SAGEMAKER_BACKOFF).state())
    if reason:
        out["reason"] = reason
    if artifacts := description.get("ModelArtifacts", {}).get("S3ModelArtifacts"):
        out["artifacts"] = artifacts
    return out


def next_region(job: RegionJob, reason: str) -> RegionJob:
    """After no capacity: the same region with fewer instances, else the plan's next acceptable
    region with the instances asked for, or give up saying why."""
    count, region = job["instance_count"], job["region"]
    tried: list[Move] = [*job.get("tried", []),
                         {"region": region, "reason": reason, "instance_count": count}]
    moved: RegionJob = {**job, "tried": tried, "attempt": int(job.get("attempt", 1)) + 1}
    smaller = shrunk(count, job.get("min_instance_count") or count)
    if smaller < count:
        moved["instance_count"] = smaller
        moved["status"] = RegionJobStatus.MOVING
        moved["reason"] = (f"{region}: {reason}; trying {smaller} × {job['instance_type']} in "
                           f"{region}")
        return moved
    remaining = [r for r in job.get("fallbacks", []) if r not in {t["region"] for t in tried}]
    asked = job.get("requested_instance_count") or count
    if not remaining:
        regions = ", ".join(dict.fromkeys(t["region"] for t in tried))
        counts = ", ".join(str(c) for c in dict.fromkeys(t["instance_count"] for t in tried))
        moved["status"] = RegionJobStatus.FAILED
        moved["reason"] = (f"No capacity for {counts} × {job['instance_type']} in any "
                           f"acceptable region (tried {regions}); last: {reason}")
        return moved
    moved["region"], moved["instance_count"] = remaining[0], asked
    moved["status"] = RegionJobStatus.MOVING
    moved["reason"] = (f"{region}: {reason}; trying {asked} × {job['instance_type']} in "
                       f"{remaining[0]}")
    return moved
