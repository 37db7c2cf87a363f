"""Each node's running time in a multi-node job, as Batch describes its nodes.

A multi-node parallel job's nodes are jobs of their own, ``<jobId>#<nodeIndex>``, each with its
``startedAt`` and ``stoppedAt`` (AWS Batch User Guide, multi-node parallel jobs; ListJobs'
``multiNodeJobId`` lists them). A worker node whose host was lost is FAILED from its loss while
the job runs on ("Child node failure doesn't cause more attempts"): its instance is paid to
then, not to the job's end. (``aws.batch.describe_jobs`` asks 100 ids a call, botocore's
DescribeJobsRequest.jobs: "A list of up to 100 job IDs".)

Pure: tested without AWS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LOST_BEFORE_END_MS = 60_000  # a FAILED node that stopped this long before its job: lost


@dataclass(frozen=True)
class NodeTime:
    """A job's nodes' running seconds added up, and how many stopped before the job did."""

    node_seconds: int
    nodes_lost: int


def node_ids(described: list[dict[str, Any]]) -> list[str]:
    """The node ids of every multi-node job in ``described`` (DescribeJobs' entries)."""
    ids = []
    for job in described:
        count = (job.get("nodeProperties") or {}).get("numNodes")
        if isinstance(count, int) and count > 1 and "#" not in str(job.get("jobId")):
            ids += [f"{job['jobId']}#{index}" for index in range(count)]
    return ids


def of_job(job: dict[str, Any], nodes: list[dict[str, Any]], now_ms: int) -> NodeTime | None:
    """The running time of ``job``'s nodes (``nodes``: DescribeJobs of its node ids), each
    from its own ``startedAt`` (else the job's) to its own ``stoppedAt`` (else the job's, or
    ``now_ms`` while it runs). None unless every node is described."""
    count = (job.get("nodeProperties") or {}).get("numNodes")
    mine = {str(n.get("jobId")).rpartition("#")[2]: n for n in nodes
            if str(n.get("jobId")).startswith(f"{job.get('jobId')}#")}
    if not isinstance(count, int) or len(mine) != count or job.get("startedAt") is None:
        return None
    job_end = _or(job.get("stoppedAt"), now_ms)
    total, lost = 0, 0
    for node in mine.values():
        started = _or(node.get("startedAt"), job["startedAt"])
        stopped = min(_or(node.get("stoppedAt"), job_end), job_end)
        total += max(0, (stopped - started) // 1000)
        # Workers stop within moments of the main node; a lost one, long before.
        lost += node.get("status") == "FAILED" and stopped < job_end - LOST_BEFORE_END_MS
    return NodeTime(total, lost)


def _or(value: Any, default: int) -> int:
    return value if isinstance(value, int) else default
