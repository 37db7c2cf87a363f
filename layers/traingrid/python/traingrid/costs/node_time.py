"""Each node's running time in a multi-node job, as Batch describes its nodes.

A multi-node parallel job's nodes are jobs of their own, ``<jobId>#<nodeIndex>``, each with its
``status``, ``startedAt`` and ``stoppedAt`` (AWS Batch User Guide, multi-node parallel jobs;
ListJobs' ``multiNodeJobId`` lists them). Every node is paid from the job's ``startedAt``: the
workers' instances were launched with the main node's, and wait for it to run before they
start (their own ``startedAt`` is later, their instance billed all the same). A worker whose
host was lost (FAILED, ``Host EC2 (instance …) terminated.``) while the job runs on ("Child node
failure doesn't cause more attempts") is paid to its ``stoppedAt``: EC2 bills no terminated
instance. A worker that failed on a healthy host is paid to the job's end: its instance stays
up until the compute environment scales in. (``aws.batch.describe_jobs`` asks 100 ids a
call, botocore's DescribeJobsRequest.jobs: "A list of up to 100 job IDs".)

Pure: tested without AWS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HOST_LOST = "Host EC2"  # Batch's statusReason of a node whose instance went away


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


def host_lost(node: dict[str, Any]) -> bool:
    return node.get("status") == "FAILED" and str(node.get("statusReason") or "").startswith(
        HOST_LOST)


def of_job(job: dict[str, Any], nodes: list[dict[str, Any]], now_ms: int) -> NodeTime | None:
    """The running time of ``job``'s nodes (``nodes``: DescribeJobs of its node ids), each
    from the job's ``startedAt`` to the job's ``stoppedAt`` (``now_ms`` while it runs), a node
    whose host was lost to its own ``stoppedAt``. None unless every node is described."""
    count = (job.get("nodeProperties") or {}).get("numNodes")
    mine = {str(n.get("jobId")).rpartition("#")[2]: n for n in nodes
            if str(n.get("jobId")).startswith(f"{job.get('jobId')}#")}
    if not isinstance(count, int) or len(mine) != count or job.get("startedAt") is None:
        return None
    job_end = _or(job.get("stoppedAt"), now_ms)
    total, lost = 0, 0
    for node in mine.values():
        stopped = min(_or(node.get("stoppedAt"), job_end), job_end) if host_lost(node) else job_end
        total += max(0, (stopped - job["startedAt"]) // 1000)
        lost += stopped < job_end
    return NodeTime(total, lost)


def _or(value: Any, default: int) -> int:
    return value if isinstance(value, int) else default
