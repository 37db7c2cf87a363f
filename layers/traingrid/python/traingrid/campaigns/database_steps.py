"""The CampaignFanout steps that read and write the campaign database: register, plan,
record, finish (only the functions that run these have the database layer).

Each step takes the TypedDict its state's Parameters build in the ASL and returns its own,
checked by mypy, not parsed at run time (the state machine wrote it). The one untrusted part,
a requested fan-out's options, PlanFanout parses once with the FanoutRequest model (pydantic)
and plans from the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

from traingrid import clock, db
from traingrid.aws import s3, stepfunctions
from traingrid.aws.secrets import connection_url
from traingrid.campaigns.fanout_request import FanoutRequest, RegionOverrides
from traingrid.campaigns.markers import CAMPAIGN_PATTERN, MARKER_NAME, parse_marker
from traingrid.campaigns.placement import plan_campaign
from traingrid.campaigns.sagemaker_job import data_input
from traingrid.costs import receipt, region_usage
from traingrid.errors import RecordNotFound, RegionFailed, RequestInvalid
from traingrid.naming import branch_name, fanout_name
from traingrid.notifications import run_status as status_events
from traingrid.observability import logger, metrics
from traingrid.settings import DatabaseSettings, PlanningSettings, RegistrationSettings
from traingrid.training.failures import advice, readable
from traingrid.validation import parse
from traingrid.vocabulary.campaign_fanout import (
    FanoutOutcome,
    FanoutPlan,
    FinishFanoutEvent,
    PlanFanoutEvent,
    RecordRegionJobEvent,
    RegionJob,
    RegionJobPlan,
    RegionJobStatus,
    RegionResult,
    UnrecordedRegion,
)
from traingrid.vocabulary.statuses import RunStatus
from traingrid.vocabulary.training_run import StepFailure

AGAIN = "start the fan-out again"


def failure_cause(failure: StepFailure) -> str:
    """A step's failure as a cause that says what to do."""
    error, cause = readable(failure)
    what_to_do = advice(error, AGAIN)
    return f"{cause.rstrip('.')}. {what_to_do}" if what_to_do else cause


def register_dataset(bucket: str, key: str, region: str, landed_at: datetime,
                     settings: RegistrationSettings) -> dict[str, Any]:
    """Register the dataset a marker completes (once) and start its campaign's fan-out.

    The window comes from when the marker landed, so a retried event lands in the same one.
    """
    try:
        marker = parse_marker(bucket, key, region)
    except RequestInvalid as invalid:
        logger.warning("marker rejected; nothing registered", extra={"problems": invalid.problems})
        return {"status": "rejected", "reason": invalid.message}
    objects = [o for o in s3.objects_under(bucket, marker.prefix, region)
               if not o["key"].endswith(MARKER_NAME)]
    with db.transaction(connection_url(settings)) as session:
        db.CampaignRepository(session).ensure(marker.campaign)
        dataset, created = db.DatasetRepository(session).register(
            marker.campaign, marker.region, marker.s3_uri, len(objects),
            sum(o["size"] for o in objects), None, landed_at)
        registered_at = dataset.registered_at
    name = fanout_name(marker.campaign, landed_at, settings.settle_minutes)
    # A retry after a failed start must still start it; a late duplicate starts nothing.
    if not created and fanout_name(marker.campaign, registered_at, settings.settle_minutes) != name:
        return {"status": "duplicate", "dataset": marker.s3_uri}
    execution = stepfunctions.start_named_execution(
        settings.campaign_fanout_state_machine_arn, name,
        {"campaign": marker.campaign, "settle_s": settings.settle_minutes * 60,
         "trigger": {"source": "s3", "bucket": bucket, "key": key, "region": region}},
    )
    metrics.add_metric(name="DatasetRegistered" if created else "DuplicateMarker",
                       unit="Count", value=1)
    return {"status": "registered" if created else "duplicate", "dataset": marker.s3_uri,
            "fanout": name, "started": execution["started"]}


def plan_fanout(event: PlanFanoutEvent, settings: PlanningSettings,
                max_concurrency: int) -> FanoutPlan:
    """Start the run's record and plan one job per region over the campaign's new data (or
    all of it, and with other options, when the fan-out was requested so: ``input.options``,
    the fields of a FanoutRequest)."""
    campaign_id, request = _fanout_input(event)
    name = event["execution_name"]
    with db.transaction(connection_url(settings)) as session:
        campaign = db.CampaignRepository(session).get(campaign_id)
        if campaign is None:
            raise RequestInvalid([{"pointer": "/campaign", "message": "no such campaign"}])
        runs = db.RunRepository(session)
        placement = request.placement or campaign.placement
        run = runs.start(campaign_id, name, event["execution_arn"], placement, clock.now())
        plans = _plan(session, campaign_id, request, settings.managed_spot)
        runs.add_planned_jobs(run, plans)
        regions = db.RegionRepository(session)
        buckets = {code: regions.require(code).artifact_bucket
                   for p in plans for code in (p.region, *p.fallbacks)}
        hyperparameters = dict(campaign.hyperparameters or {}) | request.hyperparameters
        min_count = request.min_instance_count or campaign.min_instance_count
        check_plan_options(plans, min_count, request.regions)

    def overrides(plan: RegionJobPlan) -> RegionOverrides | None:
        return request.regions.get(plan.requested_region)
    # "reason" is the branch's latest failure from here on; the plan's is kept apart.
    jobs = [RegionJob(
        region=plan.region, requested_region=plan.requested_region, s3_uri=plan.s3_uri,
        objects=plan.objects, bytes=plan.bytes, instance_type=plan.instance_type,
        instance_count=plan.instance_count, usd_per_hour=plan.usd_per_hour,
        transfer_gb=plan.transfer_gb, estimated_usd=plan.estimated_usd,
        placement_reason=plan.reason, fallbacks=list(plan.fallbacks), copy_from=plan.copy_from,
        hyperparameters=hyperparameters | (region.hyperparameters if (
            region := overrides(plan)) else {}),
        image_tag=region.image_tag if region else None,
        staged_region=plan.requested_region, staged_bytes=0,
        attempt=1, tried=[],
        status=RegionJobStatus.PLANNED, requested_instance_count=plan.instance_count,
        min_instance_count=min_count or plan.instance_count,
        branch_name=branch_name(name, plan.requested_region),
        **data_input(plan.bytes, plan.objects),
    ) for plan in plans]
    status_events.publish([status_events.change(
        "CampaignFanout", event["execution_arn"], RunStatus.RUNNING, pipeline="CampaignFanout",
        campaign=campaign_id, regions=[job["requested_region"] for job in jobs])])
    # Artifact buckets once for the run, not in every job: the state stays small with many
    # regions (each job may fall back to any of them).
    return FanoutPlan(run=name, placement=str(run.placement), jobs=jobs, buckets=buckets,
                      max_concurrency=max_concurrency)


def _fanout_input(event: PlanFanoutEvent) -> tuple[str, FanoutRequest]:
    """The campaign and the options of a fan-out's execution input, every problem at once:
    anyone allowed to start an execution can send any input."""
    problems = []
    campaign = event.get("campaign")
    if not isinstance(campaign, str) or not CAMPAIGN_PATTERN.fullmatch(campaign):
        problems.append({"pointer": "/campaign", "message": "must be a campaign's id: 1-48 "
                         "lower-case letters, digits or '-'"})
    execution_input = event.get("input")
    options = execution_input.get("options") if isinstance(execution_input, dict) else None
    request = None
    try:
        request = parse(FanoutRequest, {} if options is None else options, "fan-out options")
    except RequestInvalid as invalid:
        problems += [{"pointer": "/options" + p["pointer"], "message": p["message"]}
                     for p in invalid.problems]
    if problems or request is None or not isinstance(campaign, str):
        raise RequestInvalid(problems, "fan-out input")
    return campaign, request


def check_plan_options(plans: list[RegionJobPlan], min_count: int | None,
                        per_region: Mapping[str, RegionOverrides]) -> None:
    """What only the plan can tell: every problem at once."""
    problems = []
    if plans and min_count and min_count > plans[0].instance_count:
        problems.append({"pointer": "/options/min_instance_count", "message": (
            f"must be at most instance_count ({plans[0].instance_count}), not {min_count}")})
    planned = [p.requested_region for p in plans]
    for region in sorted(set(per_region) - set(planned)):
        problems.append({"pointer": f"/options/regions/{region}", "message": (
            f"no job of this fan-out reads data in {region} (it has data in "
            f"{', '.join(planned) or 'no region'})")})
    if problems:
        raise RequestInvalid(problems, "fan-out options")


def _plan(session: Any, campaign_id: str, request: FanoutRequest,
          spot: bool) -> list[RegionJobPlan]:
    overrides: dict[str, Any] = {
        "placement": request.placement, "instance_type": request.instance_type,
        "instance_count": request.instance_count, "spot": spot,
        "region_instance_types": {region: o.instance_type
                                  for region, o in request.regions.items() if o.instance_type}}
    if request.datasets == "all":
        return plan_campaign(session, campaign_id, **overrides)
    datasets = db.DatasetRepository(session).new_since_last_success(campaign_id)
    if not datasets:
        return []
    return plan_campaign(session, campaign_id, datasets=[d.id for d in datasets], **overrides)


def campaigns_overview(settings: DatabaseSettings) -> list[dict[str, Any]]:
    """Every campaign with its datasets by region and its last run."""
    with db.transaction(connection_url(settings)) as session:
        return db.CampaignRepository(session).overview()


def record_region_job(event: RecordRegionJobEvent, settings: DatabaseSettings) -> RegionResult:
    """Write one region's outcome; the branch's small result for the execution's output."""
    job = event["job"]
    result = region_result(job, event.get("failure"))
    with db.transaction(connection_url(settings)) as session:
        _record(session, event["execution_arn"], job, result)
    _publish(event["execution_arn"], job, result)
    return result


def region_result(job: RegionJob, failure: StepFailure | None) -> RegionResult:
    """A region's outcome from its branch's job, and the failure of a step, if one failed."""
    status, cause = job.get("status", RegionJobStatus.FAILED), job.get("reason")
    if failure is not None:
        status, cause = RegionJobStatus.FAILED, failure_cause(branch_failure(failure))
    completed = status == RegionJobStatus.COMPLETED
    if not completed and not cause:
        cause = f"the training job ended {status}"
    return RegionResult(
        region=job["region"], requested_region=job["requested_region"],
        status=status, job_name=job.get("job_name"), job_arn=job.get("job_arn"),
        artifacts=job.get("artifacts"), placement_reason=job.get("placement_reason"),
        moves=[t["region"] + ": " + t["reason"] for t in job.get("tried", [])],
        cause=None if completed else cause,
    )


def branch_failure(failure: StepFailure) -> StepFailure:
    """A failed branch execution's own error and cause: ``startExecution.sync`` reports the
    child's failure as ``States.TaskFailed`` with the child's DescribeExecution as the cause."""
    if failure.get("Error") != "States.TaskFailed":
        return failure
    try:
        described = json.loads(failure.get("Cause") or "")
    except ValueError:
        return failure
    if not isinstance(described, dict) or "Status" not in described:
        return failure
    status = described["Status"]
    return StepFailure(Error=described.get("Error") or f"Branch{status.title()}", Cause=(
        described.get("Cause") or f"the region's branch ({described.get('Name')}) ended "
        f"{status} before the region's outcome was known; a training job of it still running "
        "is stopped by the janitor. What to do: start the fan-out again for this region"))


def _record(session: Any, execution_arn: str, job: RegionJob, result: RegionResult) -> None:
    status = result["status"]
    db.RunRepository(session).record_job(
        execution_arn, job["requested_region"], status=status,
        region=job["region"], job_name=job.get("job_name"), job_arn=job.get("job_arn"),
        artifacts=job.get("artifacts"), failure_cause=result["cause"],
        staged_bytes=job.get("staged_bytes"),
        started_at=clock.parse(job.get("started_at")), ended_at=clock.now(),
        attempts=[*job.get("tried", []), {"region": job["region"], "status": status,
                                           "reason": result["cause"] or "completed"}],
    )


def _results(session: Any, execution_arn: str,
             branches: list[RegionResult | UnrecordedRegion]) -> list[RegionResult]:
    """Each branch's result; the outcome of a branch that could not record its own (its
    database write failed after its retries, or the branch's execution failed) is recorded
    here, so no region's outcome is lost."""
    results = []
    for branch in branches:
        if "unrecorded" not in branch:
            results.append(cast(RegionResult, branch))
            continue
        unrecorded = cast(UnrecordedRegion, branch)
        result = region_result(unrecorded["job"], unrecorded.get("failure"))
        _record(session, execution_arn, unrecorded["job"], result)
        _publish(execution_arn, unrecorded["job"], result)
        logger.warning(f"{result['requested_region']}: outcome recorded by FinishFanout",
                       extra={"record_failure": unrecorded.get("record_failure")})
        results.append(result)
    return results


def _publish(execution_arn: str, job: RegionJob, result: RegionResult) -> None:
    """The region's job's change, as a run-status event (never fails the step)."""
    status_events.publish([status_events.change(
        "RegionJob", execution_arn, result["status"], pipeline="CampaignFanout",
        region=job["region"], requested_region=job["requested_region"],
        job_name=job.get("job_name"), job_arn=job.get("job_arn"), cause=result["cause"])])


def finish_fanout(event: FinishFanoutEvent, settings: DatabaseSettings) -> FanoutOutcome:
    """The run's outcome: it fails only if a region finally failed, naming which and why.

    After the fan-out, each region's result has replaced its planned job in ``plan.jobs``.
    """
    state = event["state"]
    plan = state.get("plan")
    branches = (plan.get("jobs") if plan else None) or []
    if "failure" not in state and any("unrecorded" in b for b in branches):
        with db.transaction(connection_url(settings)) as session:
            results = _results(session, event["execution_arn"], branches)
    else:
        results = [b for b in branches if "unrecorded" not in b]  # type: ignore[misc]
    failed = [r for r in results if r["status"] != RegionJobStatus.COMPLETED]
    if "failure" in state:
        error, cause = readable(state["failure"])[0], failure_cause(state["failure"])
    elif failed:
        error = RegionFailed.__name__
        cause = "; ".join(f"{r['requested_region']} ({r['region']}): {r['cause']}"
                          for r in failed)
        cause = (f"{len(failed)} of {len(results)} region(s) failed: {cause}. The other "
                 "regions' results are kept.")
    else:
        error, cause = None, None
    status = RunStatus.FAILED if error else RunStatus.SUCCEEDED
    try:
        with db.transaction(connection_url(settings)) as session:
            runs = db.RunRepository(session)
            if "failure" in state:  # the fan-out broke off: some regions have no outcome
                runs.close(event["execution_arn"], clock.now(), cause or error or "failed",
                           "the fan-out failed before this region's outcome was recorded; a "
                           "training job of it still running is stopped by the janitor")
            else:
                runs.finish(event["execution_arn"], status, clock.now(), cause)
    except RecordNotFound:  # planning failed before it recorded the run: record it failed
        _record_unplanned(event, cause or "the fan-out failed before planning", settings)
    else:
        cost = record_cost(event["execution_arn"], settings)
        metrics.add_metric(name="RunCostUSD", unit="None", value=cost["actual"]["total"])
    status_events.publish([status_events.change(
        "CampaignFanout", event["execution_arn"], status, pipeline="CampaignFanout",
        campaign=state.get("campaign"), error=error, cause=cause)])
    return FanoutOutcome(status=status, error=error, cause=cause, jobs=results)


def record_cost(execution_arn: str, settings: DatabaseSettings) -> dict[str, Any]:
    """The ended run's receipt, recorded with it: each region's SageMaker job (described in
    its region, outside the transaction) and its staging, priced from the campaign database.
    Orchestration is priced from the execution's history when the run is read."""
    with db.transaction(connection_url(settings)) as session:
        run = db.RunRepository(session).get(execution_arn)
        jobs: list[dict[str, Any]] = [] if run is None else [
            {"region": job.region, "requested_region": job.requested_region,
             "job_name": job.job_name, "job_arn": job.job_arn,
             "staged_bytes": job.staged_bytes} for job in run.jobs]
    described = region_usage.describe_jobs(jobs)
    with db.transaction(connection_url(settings)) as session:
        used = region_usage.region_usage(session, jobs, described)
        usage = receipt.Usage(fanout=True, orchestration_source="the execution's history, "
                              "when the run is read (GET /runs/{name})").with_regions(used)
        cost = receipt.receipt(usage, None) | {"regions": region_usage.recorded(used)}
        db.RunRepository(session).record_cost(execution_arn, cost)
    return cost


def _record_unplanned(event: FinishFanoutEvent, cause: str, settings: DatabaseSettings) -> None:
    """A fan-out that failed before it planned still gets its run, FAILED with the cause, if
    its campaign exists (otherwise there is nothing to attach it to)."""
    campaign_id, arn = event["state"].get("campaign"), event["execution_arn"]
    now = clock.now()
    with db.transaction(connection_url(settings)) as session:
        campaign = db.CampaignRepository(session).get(campaign_id) if isinstance(
            campaign_id, str) else None
        if campaign is None:
            logger.warning("no campaign to record this failed fan-out under",
                           extra={"campaign": campaign_id, "cause": cause})
            return
        runs = db.RunRepository(session)
        runs.start(campaign.id, arn.rsplit(":", 1)[-1], arn, campaign.placement,
                   clock.parse(event.get("started_at")) or now)
        runs.finish(arn, RunStatus.FAILED, now, cause)
