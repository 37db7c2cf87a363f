"""The wait for a region's SageMaker job: woken by SageMaker's own event, checked on a timeout.

After launching the job, the region's branch (its own CampaignRegion execution) waits on a
task token (``AwaitRegionJob``, a ``lambda:invoke.waitForTaskToken`` task): the token is
parked under the job's ARN (:func:`await_job`). SageMaker sends a "SageMaker Training Job
State Change" event to its region's default bus when the job ends; each region's stack
forwards it to the home region's bus (``regional/template.yaml``), where
``RegionJobChanged`` completes the parked wait (:func:`job_changed`). The event is only a hint:
``CheckRegionJob`` describes the job after every wake-up, and the wait's own timeout (hours,
``branch.EVENT_FALLBACK_S``) is the safety net for an event that never came. SageMaker may
send an event more than once; the second finds no parked wait, or a stale token, and is left.

A job that ended before its wait was parked sends its event to nobody: :func:`await_job`
parks first, then describes the job once and completes its own wait when the job has ended.
"""

from __future__ import annotations

from typing import Any

from traingrid import clock
from traingrid.aws import sagemaker, stepfunctions, task_tokens
from traingrid.campaigns.branch import EVENT_FALLBACK_S
from traingrid.observability import logger, metrics
from traingrid.settings import RegionWaitSettings
from traingrid.vocabulary.campaign_fanout import AwaitRegionJobEvent, RegionWake

ENDED = ("Completed", "Failed", "Stopped")  # SageMaker's terminal TrainingJobStatus


def await_job(event: AwaitRegionJobEvent, settings: RegionWaitSettings) -> RegionWake:
    """Park the execution's token for the job, then look at the job once."""
    job, token = event["job"], event["token"]
    wait_s = int(job.get("poll", {}).get("wait_s") or EVENT_FALLBACK_S)
    # Park before looking: an event that lands during the look then finds the token.
    task_tokens.park(settings.region_job_tokens_table, job["job_arn"], token,
                     {"region": job["region"], "job_name": job["job_name"]},
                     clock.now().timestamp(), wait_s)
    status = sagemaker.describe_training_job(job["region"], job["job_name"])[
        "TrainingJobStatus"]
    if status not in ENDED:
        return {"woken_by": "none", "status": status, "outcome": "waiting"}
    return _wake(settings.region_job_tokens_table, job["job_arn"], token, "check", status)


def job_changed(detail: dict[str, Any], settings: RegionWaitSettings) -> RegionWake:
    """SageMaker's event about a job: wake the wait parked for it, if any."""
    arn, status = detail["TrainingJobArn"], detail["TrainingJobStatus"]
    wait = task_tokens.parked(settings.region_job_tokens_table, arn)
    if wait is None or status not in ENDED:
        # Not a fan-out's job, a repeated event, or the wait has moved on.
        return {"woken_by": "event", "status": status, "outcome": "no-wait"}
    metrics.add_metric(name="RegionJobEventReceived", unit="Count", value=1)
    return _wake(settings.region_job_tokens_table, arn, wait.token, "event", status)


def _wake(table: str, arn: str, token: str, woken_by: str, status: str) -> RegionWake:
    wake: RegionWake = {"woken_by": woken_by, "status": status, "outcome": "completed"}
    completed = stepfunctions.complete_task(token, wake)
    task_tokens.forget(table, arn, token)
    if not completed:
        wake["outcome"] = "stale-token"
    logger.info(f"region wait {wake['outcome']} by {woken_by}: {arn} is {status}")
    return wake
