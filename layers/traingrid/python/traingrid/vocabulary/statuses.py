"""The services' words for where a run and a training job stand, as the code compares them.

StrEnums: a member equals the service's string and serialises as it, so the execution's JSON,
the database's columns and DescribeExecution/DescribeJobs answers compare with them unchanged.
(A region's SageMaker job is ``campaign_fanout.RegionJobStatus``.) Standard library only, so
that pure decisions (the hydrate and export loops, the janitor) name them without boto3.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """Where a run stands: Step Functions' status of its execution (a TrainingRun's or a
    CampaignFanout's), which the campaign database keeps as the run's."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    ABORTED = "ABORTED"
    TIMED_OUT = "TIMED_OUT"
    PENDING_REDRIVE = "PENDING_REDRIVE"  # a redriven execution, before it runs again


# Under these the execution still owns what it made (the janitor leaves it alone).
LIVE_RUN_STATUSES = frozenset({RunStatus.RUNNING, RunStatus.PENDING_REDRIVE})
# How an execution can end (``training_runs.status``, in this order).
ENDED_RUN_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.ABORTED,
                      RunStatus.TIMED_OUT)
# What a run's own last step records (RecordRun's and FinishFanout's ``status``).
SELF_RECORDED_RUN_STATUSES = (RunStatus.SUCCEEDED, RunStatus.FAILED)
# A fan-out's record: running, then how its last step ended it (``campaign_runs.status``).
FANOUT_RUN_STATUSES = (RunStatus.RUNNING, *SELF_RECORDED_RUN_STATUSES)


class BatchJobStatus(StrEnum):
    """AWS Batch's status of a job (DescribeJobs, ListJobs, "Job State Change" events)."""

    SUBMITTED = "SUBMITTED"
    PENDING = "PENDING"
    RUNNABLE = "RUNNABLE"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


# Queued: the job has no nodes yet.
WAITING_FOR_CAPACITY = (BatchJobStatus.SUBMITTED, BatchJobStatus.PENDING,
                        BatchJobStatus.RUNNABLE)
ON_NODES = (BatchJobStatus.STARTING, BatchJobStatus.RUNNING)
ENDED_JOB_STATUSES = (BatchJobStatus.SUCCEEDED, BatchJobStatus.FAILED)
LIVE_BATCH_STATUSES = (*WAITING_FOR_CAPACITY, *ON_NODES)


class FileSystemLifecycle(StrEnum):
    """DescribeFileSystems' ``Lifecycle``."""

    AVAILABLE = "AVAILABLE"
    CREATING = "CREATING"
    FAILED = "FAILED"
    DELETING = "DELETING"
    MISCONFIGURED = "MISCONFIGURED"
    MISCONFIGURED_UNAVAILABLE = "MISCONFIGURED_UNAVAILABLE"
    UPDATING = "UPDATING"


class TaskLifecycle(StrEnum):
    """DescribeDataRepositoryTasks' ``Lifecycle`` (an export's)."""

    PENDING = "PENDING"
    EXECUTING = "EXECUTING"
    FAILED = "FAILED"
    SUCCEEDED = "SUCCEEDED"
    CANCELED = "CANCELED"
    CANCELING = "CANCELING"
