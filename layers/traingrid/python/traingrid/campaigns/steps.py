"""The CampaignFanout steps that work on SageMaker and S3 only: launch, check, move on.

Handlers call exactly one of these; the database steps are in ``records``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from traingrid import clock
from traingrid.aws import s3, sagemaker
from traingrid.campaigns import fanout
from traingrid.campaigns.markers import MARKER_NAME
from traingrid.campaigns.model import RegionJob, RegionJobEvent, RegionJobStatus
from traingrid.campaigns.sagemaker_job import create_request, image_uri, job_name, with_tag
from traingrid.observability import logger
from traingrid.training.waits import Poll

if TYPE_CHECKING:
    from traingrid.settings import LaunchSettings


def stage_input(job: RegionJob, campaign: str, buckets: dict[str, str]) -> tuple[str, int]:
    """The job's input in its own region: the data, or a copy of it when it trains elsewhere
    (in that region's artifact bucket, ``buckets`` by region); and the bytes copied."""
    if job["region"] == job["requested_region"]:
        return job["s3_uri"], 0
    source_bucket, _, source_prefix = job["s3_uri"].removeprefix("s3://").partition("/")
    bucket = buckets[job["region"]]
    prefix = f"campaigns/{campaign}/{job['requested_region']}/"
    _, staged_bytes = s3.copy_prefix(source_bucket, source_prefix, bucket, prefix, job["region"],
                                     job["requested_region"], skip_suffix=MARKER_NAME)
    return f"s3://{bucket}/{prefix}", staged_bytes


def launch_region_job(event: RegionJobEvent, settings: LaunchSettings,
                      account: str) -> RegionJob:
    job, campaign, execution = event["job"], event["campaign"], event["execution_name"]
    region = job["region"]
    # Named by the data's region: jobs of several data regions may train in one region.
    name = job_name(execution, job["requested_region"], int(job["attempt"]))
    s3_input, staged_bytes = stage_input(job, campaign, event["buckets"])
    output = f"s3://{event['buckets'][region]}/campaigns/{campaign}/runs/{execution}/"
    request = create_request(
        job, name=name, region=region, s3_input=s3_input, output_path=output,
        role_arn=settings.sagemaker_role_arn, spot=settings.managed_spot,
        image=image_uri(account, region, with_tag(settings.training_image_repository,
                                                  job.get("image_tag"))),
        tags={"traingrid:campaign": campaign, "traingrid:execution": event["execution_arn"],
              "traingrid:run": execution},
    )
    try:
        arn = sagemaker.create_training_job(region, request)
    except sagemaker.CapacityUnavailable as refused:
        refused_job: RegionJob = {
            **job, "status": RegionJobStatus.CAPACITY_UNAVAILABLE.value, "reason": str(refused),
            "job_name": name}
        return refused_job
    launched: RegionJob = {
        **job, "status": RegionJobStatus.IN_PROGRESS.value, "job_name": name, "job_arn": arn,
        "s3_input": s3_input, "started_at": clock.iso(clock.now()), "poll": Poll().state(),
        "staged_bytes": staged_bytes}
    return launched


def check_region_job(event: RegionJobEvent) -> RegionJob:
    job = event["job"]
    description = sagemaker.describe_training_job(job["region"], job["job_name"])
    checked: RegionJob = {**job, **fanout.check(description, Poll.of(job.get("poll")))}
    return checked


def stop_region_job(event: RegionJobEvent) -> dict[str, Any]:
    """Stop a region's job whose checks failed: the run records the region as failed, so the
    job must not train (and bill) on until the whole fan-out ends."""
    job = event["job"]
    if not job.get("job_name"):
        return {"stopped": False, "reason": "no training job was launched"}
    stopped = sagemaker.stop_training_job(job["region"], job["job_name"])
    logger.warning(f"stopping {job['job_name']} in {job['region']}: its checks failed"
                   if stopped else f"{job['job_name']} in {job['region']} had ended already",
                   extra={"region": job["region"], "job_name": job["job_name"]})
    return {"stopped": stopped, "reason": "its checks failed" if stopped else "it had ended"}


def next_region(event: RegionJobEvent) -> RegionJob:
    job = event["job"]
    return fanout.next_region(job, job.get("reason", "capacity unavailable"))
