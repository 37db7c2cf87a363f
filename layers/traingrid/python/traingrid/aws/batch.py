"""AWS Batch: reading and stopping multi-node training jobs."""

from __future__ import annotations

from typing import Any

from traingrid.aws.client_errors import translated
from traingrid.aws.clients import client
from traingrid.errors import ResourceNotFound


def describe_job(job_id: str) -> dict[str, Any]:
    with translated("Batch", "DescribeJobs"):
        jobs = client("batch").describe_jobs(jobs=[job_id])["jobs"]
    if not jobs:
        raise ResourceNotFound(f"Batch job {job_id} does not exist")
    return jobs[0]


def terminate_job(job_id: str, reason: str) -> None:
    # Batch caps the reason; the full diagnosis stays in the execution's output.
    with translated("Batch", "TerminateJob"):
        client("batch").terminate_job(jobId=job_id, reason=reason[:255])


def find_job_by_name(job_queue: str, name: str) -> dict[str, Any] | None:
    """The newest job of that name in the queue (a run's job is named after the run)."""
    with translated("Batch", "ListJobs"):
        jobs = client("batch").list_jobs(
            jobQueue=job_queue, filters=[{"name": "JOB_NAME", "values": [name]}]
        )["jobSummaryList"]
    return max(jobs, key=lambda j: j.get("createdAt", 0)) if jobs else None


def main_node_log_stream(job_id: str) -> str | None:
    """The CloudWatch Logs stream of a multi-node job's main node, once it has one."""
    job = describe_job(job_id)
    main = (job.get("nodeProperties") or {}).get("mainNode", 0)
    try:
        node = describe_job(f"{job_id}#{main}")
    except ResourceNotFound:
        node = job
    return (node.get("container") or {}).get("logStreamName")


def list_jobs(job_queue: str, status: str) -> list[dict[str, Any]]:
    """The queue's jobs in one status (summaries)."""
    found: list[dict[str, Any]] = []
    with translated("Batch", "ListJobs"):
        for page in client("batch").get_paginator("list_jobs").paginate(
                jobQueue=job_queue, jobStatus=status):
            found += page["jobSummaryList"]
    return found


def jobs_named(job_queue: str, name: str) -> list[dict[str, Any]]:
    """Every job of that name in the queue, in any status (summaries)."""
    found: list[dict[str, Any]] = []
    with translated("Batch", "ListJobs"):
        for page in client("batch").get_paginator("list_jobs").paginate(
                jobQueue=job_queue, filters=[{"name": "JOB_NAME", "values": [name]}]):
            found += page["jobSummaryList"]
    return found


def describe_jobs(job_ids: list[str]) -> list[dict[str, Any]]:
    """Full descriptions (tags included), 100 jobs per call as Batch allows."""
    found: list[dict[str, Any]] = []
    for start in range(0, len(job_ids), 100):
        with translated("Batch", "DescribeJobs"):
            found += client("batch").describe_jobs(jobs=job_ids[start:start + 100])["jobs"]
    return found
