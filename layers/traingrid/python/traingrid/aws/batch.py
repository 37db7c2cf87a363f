"""AWS Batch: reading and stopping multi-node training jobs."""

from __future__ import annotations

from typing import Any

from traingrid.aws.clients import client
from traingrid.aws.errors import translated
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
