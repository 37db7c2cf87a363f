"""Repositories: idempotent registration and runs, the overview, new data, constraints."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError, StatementError
from sqlalchemy.orm import Session

from tests.db.seed import CAMPAIGN, P3, T0, add_dataset, add_regions, campaign_uri, hours
from traingrid.campaigns.placement import plan_campaign
from traingrid.db.engine import engine_for, transaction
from traingrid.db.models import Campaign, CampaignRun, Dataset, Region, RegionJob, RunStatus
from traingrid.db.repositories import (
    CampaignRepository,
    DatasetRepository,
    RegionRepository,
    RunRepository,
)
from traingrid.errors import RecordNotFound
from traingrid.vocabulary.campaign_fanout import Placement

ARN = "arn:aws:states:us-east-1:123456789012:execution:CampaignFanout:sf-2026-11-20261101T0600"


def count(session: Session, model) -> int:
    return session.scalars(select(func.count()).select_from(model)).one()


def test_campaign_ensure_creates_once_with_defaults(session):
    campaigns = CampaignRepository(session)
    created = campaigns.ensure(CAMPAIGN, description="Street scenes", instance_count=4)
    again = campaigns.ensure(CAMPAIGN, description="ignored once it exists")
    assert again is created and count(session, Campaign) == 1
    assert (created.description, created.instance_count) == ("Street scenes", 4)
    assert (created.instance_type, created.placement, created.expected_hours) == (
        P3, "data-local", 8.0)
    assert created.hyperparameters == {} and created.created_at.tzinfo is not None
    assert campaigns.get("nope") is None


def test_region_upsert_updates_and_replaces_prices(session):
    add_regions(session)
    regions = RegionRepository(session)
    regions.upsert("us-west-2", enabled=False, transfer_usd_per_gb="0.09",
                   artifact_bucket="other-bucket",
                   prices={"ml.p4d.24xlarge": {"on_demand_usd_per_hour": 37.688,
                                               "capacity_instances": 2}})
    session.expire_all()
    region = regions.get("us-west-2")
    assert (region.enabled, str(region.transfer_usd_per_gb), region.artifact_bucket) == (
        False, "0.090000", "other-bucket")
    assert [(p.instance_type, float(p.on_demand_usd_per_hour), p.spot_usd_per_hour,
             p.capacity_instances) for p in region.prices] == [
        ("ml.p4d.24xlarge", 37.688, None, 2)]
    assert count(session, Region) == 4


def test_registering_the_same_marker_twice_keeps_one_dataset(session):
    add_regions(session)
    CampaignRepository(session).ensure(CAMPAIGN)
    datasets = DatasetRepository(session)
    args = (CAMPAIGN, "us-west-2", campaign_uri("us-west-2"), 1200, 10**12, '"abc"', T0)
    first, created = datasets.register(*args)
    second, created_again = datasets.register(*args)
    assert (created, created_again) == (True, False)
    assert second.id == first.id and count(session, Dataset) == 1
    assert (first.objects, first.bytes, first.marker_etag, first.registered_at) == (
        1200, 10**12, '"abc"', T0)
    _, other = datasets.register(CAMPAIGN, "us-west-2", campaign_uri("us-west-2") + "b/", 1, 1)
    assert other and count(session, Dataset) == 2


def test_concurrent_registrations_create_one_dataset(migrated_url):
    with transaction(migrated_url) as session:
        add_regions(session)
        CampaignRepository(session).ensure(CAMPAIGN)
    barrier, results = threading.Barrier(2), []

    def register() -> None:
        barrier.wait()
        with transaction(migrated_url) as session:
            _, created = DatasetRepository(session).register(
                CAMPAIGN, "eu-west-1", campaign_uri("eu-west-1"), 10, 100, None, T0)
            results.append(created)

    threads = [threading.Thread(target=register) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(results) == [False, True]
    with Session(engine_for(migrated_url)) as session:
        assert count(session, Dataset) == 1


def test_overview_lists_datasets_and_last_run_in_three_queries(session, statements):
    add_regions(session)
    add_dataset(session, "us-west-2", size=5, objects=2)
    add_dataset(session, "eu-west-1", size=7, objects=3, at=T0 + hours(1))
    CampaignRepository(session).ensure("empty-campaign")
    runs = RunRepository(session)
    runs.start(CAMPAIGN, "first", ARN + "-1", "data-local", T0 + hours(2))
    runs.finish(ARN + "-1", "SUCCEEDED", T0 + hours(9))
    runs.start(CAMPAIGN, "second", ARN + "-2", "cheapest", T0 + hours(24))
    session.flush()
    before = statements()
    overview = CampaignRepository(session).overview()
    assert statements() - before == 3
    assert [c["id"] for c in overview] == ["empty-campaign", CAMPAIGN]
    assert overview[0]["datasets"] == [] and overview[0]["last_run"] is None
    campaign = overview[1]
    assert campaign["datasets"] == [
        {"region": "eu-west-1", "s3_uri": campaign_uri("eu-west-1"), "objects": 3, "bytes": 7,
         "registered_at": "2026-11-01T07:00:00Z"},
        {"region": "us-west-2", "s3_uri": campaign_uri("us-west-2"), "objects": 2, "bytes": 5,
         "registered_at": "2026-11-01T06:00:00Z"},
    ]
    assert campaign["last_run"] == {"name": "second", "status": "RUNNING",
                                    "started_at": "2026-11-02T06:00:00Z", "ended_at": None}


def test_new_since_last_success(session):
    add_regions(session)
    early = add_dataset(session, "us-west-2", at=T0)
    late = add_dataset(session, "eu-west-1", at=T0 + hours(10))
    datasets, runs = DatasetRepository(session), RunRepository(session)
    assert datasets.new_since_last_success(CAMPAIGN) == [late, early]  # by region
    runs.start(CAMPAIGN, "ok", ARN + "-ok", "data-local", T0 + hours(5))
    runs.finish(ARN + "-ok", RunStatus.SUCCEEDED, T0 + hours(8))
    # Neither a failed nor a running run moves the cut-off.
    runs.start(CAMPAIGN, "bad", ARN + "-bad", "data-local", T0 + hours(11))
    runs.finish(ARN + "-bad", RunStatus.FAILED, T0 + hours(12), "RegionFailed")
    runs.start(CAMPAIGN, "now", ARN + "-now", "data-local", T0 + hours(13))
    assert datasets.new_since_last_success(CAMPAIGN) == [late]
    assert datasets.new_since_last_success("other") == []


def start_planned_run(session: Session) -> CampaignRun:
    add_regions(session, capacity={"us-west-2": 0})
    for region in ("us-west-2", "eu-west-1"):
        add_dataset(session, region)
    runs = RunRepository(session)
    run = runs.start(CAMPAIGN, "sf-2026-11-20261101T0600", ARN, Placement.DATA_LOCAL, T0)
    runs.add_planned_jobs(run, plan_campaign(session, CAMPAIGN))
    return run


def test_a_region_job_status_outside_the_enum_is_refused(session):
    run = start_planned_run(session)
    session.flush()
    run.jobs[0].status = "Lost"
    with pytest.raises(IntegrityError):
        session.flush()


def test_run_start_and_planned_jobs_are_idempotent(session):
    run = start_planned_run(session)
    runs = RunRepository(session)
    again = runs.start(CAMPAIGN, "a retry", ARN, "cheapest", T0 + hours(1))
    jobs = runs.add_planned_jobs(again, plan_campaign(session, CAMPAIGN, instance_count=1))
    assert again is run and count(session, CampaignRun) == 1 and count(session, RegionJob) == 2
    assert (run.name, run.placement, run.status, run.started_at) == (
        "sf-2026-11-20261101T0600", "data-local", "RUNNING", T0)
    moved, home = jobs  # ordered by requested region
    assert (moved.requested_region, moved.region, moved.status) == ("eu-west-1", "eu-west-1",
                                                                      "PLANNED")
    assert (home.requested_region, home.region) == ("us-west-2", "us-east-1")
    assert home.s3_input == campaign_uri("us-west-2") and home.attempts == []
    assert "us-west-2 has no capacity for 10 × ml.p3.16xlarge" in home.placement_reason


def test_record_job_updates_fields_and_appends_attempts(migrated_url):
    with transaction(migrated_url) as session:
        start_planned_run(session)
    with transaction(migrated_url) as session:
        runs = RunRepository(session)
        runs.record_job(ARN, "us-west-2", status="Failed", attempt={
            "region": "us-east-1", "status": "Failed", "reason": "CapacityError"})
    with transaction(migrated_url) as session:
        RunRepository(session).record_job(
            ARN, "us-west-2", status="Completed", region="eu-west-1", job_name="sf-usw2-2",
            job_arn="arn:aws:sagemaker:eu-west-1:123456789012:training-job/sf-usw2-2",
            started_at=T0 + hours(1), ended_at=T0 + hours(9), artifacts="s3://a/model.tar.gz",
            attempt={"region": "eu-west-1", "status": "Completed", "reason": "completed"})
    with transaction(migrated_url) as session:
        runs = RunRepository(session)
        runs.finish(ARN, "SUCCEEDED", T0 + hours(10))
    with Session(engine_for(migrated_url)) as session:
        run = RunRepository(session).get(ARN)
        job = next(j for j in run.jobs if j.requested_region == "us-west-2")
        assert (run.status, run.ended_at, run.failure_cause) == ("SUCCEEDED", T0 + hours(10), None)
        assert (job.status, job.region, job.job_name, job.artifacts) == (
            "Completed", "eu-west-1", "sf-usw2-2", "s3://a/model.tar.gz")
        assert (job.started_at, job.ended_at) == (T0 + hours(1), T0 + hours(9))
        assert [a["region"] for a in job.attempts] == ["us-east-1", "eu-west-1"]


def test_record_job_can_replace_attempts_and_rejects_unknown_fields(session):
    start_planned_run(session)
    runs = RunRepository(session)
    tried = [{"region": "eu-west-1", "status": "Completed", "reason": "completed"}]
    assert runs.record_job(ARN, "eu-west-1", attempts=tried).attempts == tried
    with pytest.raises(TypeError, match="cannot set \\['instance_count'\\]"):
        runs.record_job(ARN, "eu-west-1", instance_count=3)
    with pytest.raises(RecordNotFound, match="no ap-south-1 job"):
        runs.record_job(ARN, "ap-south-1", status="Failed")
    with pytest.raises(RecordNotFound):
        runs.finish(ARN + "-unknown", "FAILED", T0)
    with pytest.raises(ValueError, match="SUCCEEDED or FAILED"):
        runs.finish(ARN, "RUNNING", T0)
    assert runs.get(ARN + "-unknown") is None


def test_deleting_a_run_deletes_its_jobs(session):
    run = start_planned_run(session)
    session.execute(delete(CampaignRun).where(CampaignRun.id == run.id))
    assert count(session, RegionJob) == 0


def test_constraints_hold_on_every_backend(session):
    add_regions(session)
    CampaignRepository(session).ensure(CAMPAIGN)
    bad_rows = [
        Dataset(campaign_id=CAMPAIGN, region_code="mars-north-1", s3_uri="s3://x/", objects=1,
                bytes=1),  # foreign key (SQLite enforces it only when asked to)
        Campaign(id="c2", placement="anywhere"),
        CampaignRun(campaign_id=CAMPAIGN, name="r", execution_arn="a", placement="cheapest",
                    status="DONE", started_at=T0),
    ]
    for row in bad_rows:
        with pytest.raises(IntegrityError), session.begin_nested():
            session.add(row)
            session.flush()


def test_times_are_stored_in_utc_and_must_be_aware(session):
    add_regions(session)
    paris = timezone(timedelta(hours=1))
    dataset = add_dataset(session, "eu-west-1", at=datetime(2026, 11, 1, 8, 0, tzinfo=paris))
    session.expire_all()
    stored = session.get(Dataset, dataset.id).registered_at
    assert stored == datetime(2026, 11, 1, 7, 0, tzinfo=UTC) and stored.tzinfo == UTC
    with pytest.raises(StatementError, match="naive datetime"):
        DatasetRepository(session).register(CAMPAIGN, "eu-west-1", "s3://x/", 1, 1, None,
                                            datetime(2026, 11, 1))


def test_transaction_commits_on_success_and_rolls_back_on_error(migrated_url):
    with transaction(migrated_url) as session:
        CampaignRepository(session).ensure("kept")
    with pytest.raises(RuntimeError), transaction(migrated_url) as session:
        CampaignRepository(session).ensure("dropped")
        raise RuntimeError("boom")
    with Session(engine_for(migrated_url)) as session:
        assert session.scalars(select(Campaign.id)).all() == ["kept"]
    assert engine_for(migrated_url) is engine_for(migrated_url)


def test_running_runs_and_closing_one_whose_execution_ended(session):
    start_planned_run(session)
    runs = RunRepository(session)
    runs.start(CAMPAIGN, "done", ARN + "-done", "data-local", T0 + hours(1))
    runs.finish(ARN + "-done", RunStatus.SUCCEEDED, T0 + hours(2))
    runs.record_job(ARN, "eu-west-1", status="Completed", artifacts="s3://a/model.tar.gz")

    assert [r.execution_arn for r in runs.running()] == [ARN]
    closed = runs.close(ARN, T0 + hours(3), "The execution ended ABORTED", "stopped early")

    assert (closed.status, closed.ended_at, closed.failure_cause) == (
        "FAILED", T0 + hours(3), "The execution ended ABORTED")
    jobs = {j.requested_region: j for j in closed.jobs}
    # A job with an outcome keeps it; the others are stopped, saying why.
    assert (jobs["eu-west-1"].status, jobs["eu-west-1"].failure_cause) == ("Completed", None)
    assert (jobs["us-west-2"].status, jobs["us-west-2"].failure_cause) == ("Stopped",
                                                                          "stopped early")
    assert runs.running() == []
    with pytest.raises(RecordNotFound):
        runs.close(ARN + "-unknown", T0, "x", "y")


def test_region_codes_are_every_region_enabled_or_not(session):
    add_regions(session)
    region = RegionRepository(session)
    codes = region.codes()
    region.get(codes[0]).enabled = False

    assert region.codes() == codes == sorted(codes) and len(codes) > 1


def test_a_run_whose_every_region_completed_closes_succeeded(session):
    start_planned_run(session)
    runs = RunRepository(session)
    for region in ("eu-west-1", "us-west-2"):
        runs.record_job(ARN, region, status="Completed", artifacts=f"s3://{region}/model")

    closed = runs.close(ARN, T0 + hours(3), "The execution ended ABORTED", "stopped early")

    assert (closed.status, closed.failure_cause) == ("SUCCEEDED", None)
    assert {j.status for j in closed.jobs} == {"Completed"}


def test_a_region_completed_after_its_run_was_closed_completes_the_run(session):
    start_planned_run(session)
    runs = RunRepository(session)
    runs.record_job(ARN, "eu-west-1", status="Completed")
    closed = runs.close(ARN, T0 + hours(3), "The execution ended ABORTED", "stopped early")
    assert closed.status == "FAILED"

    # The step that was in flight when the execution stopped records its region at last.
    runs.record_job(ARN, "us-west-2", status="Completed", artifacts="s3://b/model")

    assert (closed.status, closed.failure_cause) == ("SUCCEEDED", None)
    runs.record_job(ARN, "us-west-2", status="Failed", failure_cause="it did not")
    assert closed.status == "SUCCEEDED"  # only completing every region changes the outcome
