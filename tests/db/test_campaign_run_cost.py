"""A fan-out's receipt recorded with its campaign run: each region's SageMaker job priced at
the region's price in the database, its staging at the data region's transfer price, kept
exactly on SQLite and PostgreSQL and counted in the period's costs."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from tests.db.seed import CAMPAIGN, P3, T0, add_data_everywhere, add_regions
from traingrid.aws import sagemaker
from traingrid.campaigns import database_steps
from traingrid.campaigns.placement import plan_campaign
from traingrid.costs import receipt
from traingrid.db.engine import transaction
from traingrid.db.repositories import RunRepository
from traingrid.errors import AwsServiceError

ARN = "arn:aws:states:us-east-1:123456789012:execution:traingrid-CampaignFanout:sf-1"


def _plan_a_run(url: str) -> None:
    """The sample campaign's run, planned in every region its data is in."""
    with transaction(url) as session:
        add_regions(session, prices={"eu-west-1": 30.47})
        add_data_everywhere(session)
        runs = RunRepository(session)
        run = runs.start(CAMPAIGN, "sf-1", ARN, "data-local", T0)
        runs.add_planned_jobs(run, plan_campaign(session, CAMPAIGN))


def test_a_fanouts_receipt_is_recorded_with_its_run_and_read_back_exactly(
        migrated_url, monkeypatch):
    _plan_a_run(migrated_url)
    with transaction(migrated_url) as session:
        runs = RunRepository(session)
        # eu-west-1 trained in us-east-1 (after copying its data there); eu-central-1 never
        # started; us-west-2's job cannot be described.
        runs.record_job(ARN, "eu-west-1", status="Completed", region="us-east-1",
                        job_name="sf-1-eu-west-1", staged_bytes=50 * 10**9)
        runs.record_job(ARN, "us-east-1", status="Completed", job_name="sf-1-us-east-1")
        runs.record_job(ARN, "us-west-2", status="Completed", job_name="sf-1-us-west-2")
        runs.finish(ARN, "SUCCEEDED", T0 + timedelta(hours=2))

    described = {("us-east-1", "sf-1-eu-west-1"): (3600, 3600),
                 ("us-east-1", "sf-1-us-east-1"): (1800, 6000)}  # managed spot: 70% saved

    def describe(region: str, name: str) -> dict:
        if (region, name) not in described:
            raise AwsServiceError("SageMaker", "DescribeTrainingJob", "AccessDenied", "no")
        billable, training = described[(region, name)]
        return {"BillableTimeInSeconds": billable, "TrainingTimeInSeconds": training,
                "ResourceConfig": {"InstanceType": P3, "InstanceCount": 2}}

    monkeypatch.setattr(database_steps, "connection_url", lambda _settings: migrated_url)
    monkeypatch.setattr(sagemaker, "describe_training_job", describe)
    cost = database_steps.record_cost(ARN, None)  # type: ignore[arg-type]

    # 2 instances × 1 h and × 0.5 h at us-east-1's 28.152; 50 GB out of eu-west-1 at 0.02.
    assert cost["actual"]["compute"] == round(2 * 1.5 * 28.152, 6)
    assert cost["actual"]["staging"] == 1.0
    assert cost["actual"]["total"] == round(2 * 1.5 * 28.152 + 1.0, 6)
    assert "managed spot saved 70%" in " ".join(line["item"] for line in cost["lines"])
    unpriced = {line["item"]: line["source"] for line in cost["lines"]
                if line["part"] == "compute" and line["quantity"] is None}
    assert unpriced == {"SageMaker sf-1-us-west-2 in us-west-2":
                        "not priced: DescribeTrainingJob failed (SageMaker.DescribeTrainingJob "
                        "failed: AccessDenied: no)"}
    with transaction(migrated_url) as session:
        run = RunRepository(session).get(ARN)
        assert run is not None and run.cost == cost  # the JSON comes back as written
        assert run.cost_usd == Decimal(str(cost["actual"]["total"]))
        listed = RunRepository(session).costs(since=T0, until=T0 + timedelta(days=1))
        assert [(r["pipeline"], r["campaign"], r["actual"]) for r in listed] == [
            ("CampaignFanout", CAMPAIGN, cost["actual"])]
        assert RunRepository(session).costs(since=T0 + timedelta(days=1)) == []

    # What is recorded prices the regions again exactly as the receipt did.
    again = receipt.receipt(receipt.Usage(fanout=True).with_regions(
        receipt.recorded_regions(cost["regions"])), None)
    assert again["actual"] == cost["actual"]


def test_a_region_job_that_never_started_is_left_off_the_receipt_with_a_word(
        migrated_url, monkeypatch):
    """Named when planned, refused before SageMaker made it (staging failed, say): SageMaker
    has no such job, the receipt says so, and the run's cost is still recorded."""
    _plan_a_run(migrated_url)
    with transaction(migrated_url) as session:
        RunRepository(session).record_job(ARN, "us-west-2", status="Failed",
                                          job_name="sf-1-us-west-2")
        RunRepository(session).finish(ARN, "FAILED", T0 + timedelta(hours=1))

    def describe(region: str, name: str) -> dict:  # as the emulator and SageMaker answer
        raise AwsServiceError("SageMaker", "DescribeTrainingJob", "ValidationException",
                              f"Could not find training job '{name}'.")

    monkeypatch.setattr(database_steps, "connection_url", lambda _settings: migrated_url)
    monkeypatch.setattr(sagemaker, "describe_training_job", describe)
    cost = database_steps.record_cost(ARN, None)  # type: ignore[arg-type]

    assert cost["actual"]["compute"] == 0
    assert [(line["item"], line["source"]) for line in cost["lines"]
            if line["part"] == "compute"] == [
        ("SageMaker sf-1-us-west-2 in us-west-2",
         "not priced: it never started (SageMaker has no such job)")]
    read_back = receipt.receipt(receipt.Usage(fanout=True).with_regions(
        receipt.recorded_regions(cost["regions"])), None)
    assert [line for line in read_back["lines"] if line["part"] == "compute"] == [
        line for line in cost["lines"] if line["part"] == "compute"]
