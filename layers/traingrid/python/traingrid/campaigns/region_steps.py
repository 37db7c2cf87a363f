"""The CampaignFanout steps that work on SageMaker and S3 only: stage, launch, check, move on.

Handlers call exactly one of these; the database steps are in ``database_steps``. Each takes
the TypedDict its state's Parameters build (checked by mypy; these start cold on every poll of
every region, so nothing parses them at run time) and returns the region's job, typed.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from traingrid import clock
from traingrid.aws import s3, sagemaker
from traingrid.campaigns import branch, staging
from traingrid.campaigns.markers import MARKER_NAME
from traingrid.campaigns.sagemaker_job import create_request, image_uri, with_tag
from traingrid.naming import job_name
from traingrid.observability import logger
from traingrid.training.waits import Poll
from traingrid.vocabulary.campaign_fanout import (
    LaunchRegionJobEvent,
    RegionJob,
    RegionJobEvent,
    RegionJobStatus,
    RegionJobStop,
    StageInputEvent,
    Staging,
    Upload,
)

if TYPE_CHECKING:
    from traingrid.settings import LaunchSettings


# Each call copies for at most this long (the function's timeout is 15 minutes) and at most
# this many objects, so a large campaign's progress shows in the execution; copies run side by
# side, the parts of a large object too.
STAGING_BUDGET_S = 600.0
STAGING_BATCH = 1000
PARALLEL_COPIES = 8


def stage_input(event: StageInputEvent, budget_s: float = STAGING_BUDGET_S,
                batch: int = STAGING_BATCH) -> RegionJob:
    """Copy the next share of a job's data into the region it trains in (that region's
    artifact bucket): objects in key order, a large one in parts, until the call's budget is
    spent or all is there. The state machine calls again until ``staging.done``."""
    job, region = event["job"], event["job"]["region"]
    target_bucket = event["buckets"][region]
    target_prefix = f"campaigns/{event['campaign']}/{job['requested_region']}/"
    state = job.get("staging")
    if state is None or state["region"] != region:
        state = staging.started(region, f"s3://{target_bucket}/{target_prefix}")
    state = {**state, "calls": state["calls"] + 1}
    source_bucket, _, source_prefix = job["s3_uri"].removeprefix("s3://").partition("/")
    copier = _Copier(region, target_bucket, target_prefix, source_bucket, source_prefix,
                     time.monotonic() + budget_s)
    if state.get("upload"):
        state = copier.large(state)
    pending: list[dict[str, Any]] = []
    listing = s3.objects_under(source_bucket, source_prefix, job["requested_region"],
                               after=state["after"])
    first, listed_all = state["objects"], False
    while not state.get("upload") and not copier.out_of_time():
        item = next(listing, None)
        if item is None:
            listed_all = True
            break
        if item["key"].endswith(MARKER_NAME):
            continue
        if staging.needs_multipart(item["size"]):
            state = copier.small(state, pending)
            pending = []
            state = copier.large({**state, "upload": copier.start(item)})
            continue
        pending.append(item)
        if len(pending) >= 4 * PARALLEL_COPIES:
            state = copier.small(state, pending)
            pending = []
        if state["objects"] + len(pending) - first >= batch:
            break
    state = copier.small(state, pending)
    state["done"] = listed_all and not state.get("upload")
    staged: RegionJob = {**job, "staging": state, "staged_bytes": state["bytes"]}
    if state["done"]:
        staged["staged_region"], staged["s3_input"] = region, state["target"]
    logger.info(f"staging {job['requested_region']} → {region}: {state['objects']} objects, "
                f"{state['bytes']} bytes{' (done)' if state['done'] else ''}",
                extra={"staging": state})
    return staged


class _Copier:
    """The copies of one staging call, into ``region`` under ``target_prefix``."""

    def __init__(self, region: str, bucket: str, target_prefix: str, source_bucket: str,
                 source_prefix: str, deadline: float) -> None:
        self.region, self.bucket, self.target_prefix = region, bucket, target_prefix
        self.source_bucket, self.source_prefix, self.deadline = (source_bucket, source_prefix,
                                                                 deadline)

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline

    def target(self, key: str) -> str:
        return self.target_prefix + key.removeprefix(self.source_prefix)

    def small(self, state: Staging, items: list[dict[str, Any]]) -> Staging:
        """Copy objects of at most 5 GiB with CopyObject, side by side."""
        if not items:
            return state
        with ThreadPoolExecutor(PARALLEL_COPIES) as pool:
            list(pool.map(lambda item: s3.copy_object(
                self.region, self.bucket, self.target(item["key"]), self.source_bucket,
                item["key"]), items))
        return {**state, "after": items[-1]["key"], "objects": state["objects"] + len(items),
                "bytes": state["bytes"] + sum(item["size"] for item in items)}

    def start(self, item: dict[str, Any]) -> Upload:
        upload_id = s3.start_multipart(self.region, self.bucket, self.target(item["key"]))
        return Upload(key=item["key"], size=item["size"], upload_id=upload_id,
                              next_part=1)

    def large(self, state: Staging) -> Staging:
        """Copy the parts of the object in progress, side by side, while there is time; finish
        the upload once every part is there."""
        upload = state.get("upload")
        if upload is None:  # nothing in progress
            return state
        key, size, total = upload["key"], upload["size"], staging.part_count(upload["size"])
        part = upload["next_part"]
        while part <= total and not self.out_of_time():
            parts = range(part, min(total, part + PARALLEL_COPIES - 1) + 1)
            with ThreadPoolExecutor(PARALLEL_COPIES) as pool:
                list(pool.map(lambda n: s3.copy_part(
                    self.region, self.bucket, self.target(key), upload["upload_id"], n,
                    self.source_bucket, key, staging.part_range(size, n)), parts))
            part = parts[-1] + 1
        if part <= total:
            return {**state, "upload": {**upload, "next_part": part}}
        s3.finish_multipart(self.region, self.bucket, self.target(key), upload["upload_id"])
        return {**state, "upload": None, "after": key, "objects": state["objects"] + 1,
                "bytes": state["bytes"] + size}


def launch_region_job(event: LaunchRegionJobEvent, settings: LaunchSettings,
                      account: str) -> RegionJob:
    job, campaign, execution = event["job"], event["campaign"], event["execution_name"]
    region = job["region"]
    # Named by the data's region: jobs of several data regions may train in one region.
    name = job_name(execution, job["requested_region"], int(job["attempt"]))
    # The data where the job trains: where it lies, or the copy StageInput made.
    s3_input = job.get("s3_input") if job["region"] != job["requested_region"] else None
    s3_input = s3_input or job["s3_uri"]
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
            **job, "status": RegionJobStatus.CAPACITY_UNAVAILABLE, "reason": str(refused),
            "job_name": name}
        return refused_job
    launched: RegionJob = {
        **job, "status": RegionJobStatus.IN_PROGRESS, "job_name": name, "job_arn": arn,
        "s3_input": s3_input, "started_at": clock.iso(clock.now()),
        "poll": Poll(wait_s=branch.EVENT_FALLBACK_S).state()}
    return launched


def check_region_job(event: RegionJobEvent) -> RegionJob:
    job = event["job"]
    description = sagemaker.describe_training_job(job["region"], job["job_name"])
    checked: RegionJob = {**job, **branch.check(description, Poll.of(job.get("poll")))}
    return checked


def stop_region_job(event: RegionJobEvent) -> RegionJobStop:
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
    return branch.next_region(job, job.get("reason", "capacity unavailable"))
