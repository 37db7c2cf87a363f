"""CampaignFanout end to end on the emulator: markers in four regions' buckets, one fan-out,
one SageMaker job (MPI-launched PyTorch DDP) per region, every outcome in the campaign
database."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from moto.s3.models import s3_backends
from sqlalchemy import update

from tests.integration.conftest import finish
from tests.integration.iam import missing_permissions
from traingrid.db.engine import transaction
from traingrid.db.models import Campaign, RegionPrice
from traingrid.db.repositories import CampaignRepository
from traingrid_local.emulator.fault_injection import StateFault
from traingrid_local.emulator.s3 import declare_size
from traingrid_local.emulator.session import ACCOUNT_ID
from traingrid_local.stack import report, sample_campaign
from traingrid_local.stack.sample_campaign import CAMPAIGN, REGION_PRICES

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e
REGIONS = set(REGION_PRICES)


def jobs_by_data_region(outcome) -> dict[str, dict]:
    return {job["requested_region"]: job for job in outcome.execution["jobs"]}


def test_markers_in_four_regions_train_480_gpus_where_the_data_is(run_campaign):
    outcome = run_campaign("happy")
    execution = outcome.execution
    assert (execution["state_machine"], execution["status"]) == (
        "CampaignFanout", "SUCCEEDED"), (execution["error"], execution["cause"])
    assert re.fullmatch(rf"{CAMPAIGN}-\d{{8}}T\d{{4}}-[0-9a-f]{{12}}", execution["name"])
    jobs = jobs_by_data_region(outcome)
    assert set(jobs) == REGIONS
    for region, job in jobs.items():
        assert (job["region"], job["status"]) == (region, "Completed")
        assert f":{region}:" in job["job_arn"]
        assert job["artifacts"].startswith(f"s3://traingrid-artifacts-123456789012-{region}/")
        assert "data-local" in job["placement_reason"]
        assert len(job["job_name"]) <= 63
    described = outcome.emulator.client("sagemaker", "eu-central-1").describe_training_job(
        TrainingJobName=jobs["eu-central-1"]["job_name"])
    assert described["ResourceConfig"]["InstanceCount"] == 10  # 4 regions × 10 × 8 GPUs
    assert described["HyperParameters"]["sagemaker_mpi_num_of_processes_per_host"] == "8"
    # The image's own entry point, the Batch nodes' trainer, and the metrics it logs.
    assert described["HyperParameters"]["sagemaker_program"] == "traingrid_train.py"
    # The image is in the ECR repository the region's stack made, where push-images puts it.
    (repository,) = outcome.emulator.client("ecr", "eu-central-1").describe_repositories(
        repositoryNames=["traingrid-sagemaker"])["repositories"]
    assert described["AlgorithmSpecification"]["TrainingImage"] == (
        repository["repositoryUri"] + ":0.1.0")  # TrainingImageRepository's version
    assert (ROOT / "containers" / "sagemaker" / "traingrid_train.py").is_file()
    assert [d["Name"] for d in described["AlgorithmSpecification"]["MetricDefinitions"]] == [
        "train:loss", "train:images_per_second"]
    assert described["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == (
        f"s3://traingrid-campaign-123456789012-eu-central-1/campaigns/{CAMPAIGN}/eu-central-1/")
    # A few shards: copied onto each instance, the smallest volume.
    assert described["InputDataConfig"][0]["InputMode"] == "File"
    assert described["ResourceConfig"]["VolumeSizeInGB"] == 50
    assert {(j["input_mode"], j["volume_size_gb"]) for j in jobs.values()} == {("File", 50)}
    assert outcome.report["leaked_resources"] == []
    with transaction(outcome.deployment.database_url) as session:
        (campaign,) = CampaignRepository(session).overview()
    assert {d["region"] for d in campaign["datasets"]} == REGIONS
    assert campaign["last_run"]["status"] == "SUCCEEDED"


def test_a_region_with_capacity_for_fewer_instances_trains_there_on_fewer(run_campaign):
    outcome = run_campaign("sagemaker-shrink")
    assert outcome.execution["status"] == "SUCCEEDED"
    shrunk = jobs_by_data_region(outcome)["us-west-2"]
    assert (shrunk["status"], shrunk["region"]) == ("Completed", "us-west-2")
    first, second = shrunk["attempts"]
    assert (first["region"], first["instance_count"]) == ("us-west-2", 10)
    assert "CapacityError" in first["reason"]
    assert second["region"] == "us-west-2" and second["status"] == "Completed"
    described = outcome.emulator.client("sagemaker", "us-west-2").describe_training_job(
        TrainingJobName=shrunk["job_name"])
    assert described["ResourceConfig"]["InstanceCount"] == 5
    assert outcome.report["leaked_resources"] == []


def test_no_capacity_in_one_region_moves_its_job_and_says_why(run_campaign):
    outcome = run_campaign("sagemaker-capacity")
    assert outcome.execution["status"] == "SUCCEEDED"
    moved = jobs_by_data_region(outcome)["us-west-2"]
    assert moved["status"] == "Completed" and moved["region"] != "us-west-2"
    # The report says what it ran and how much was copied to where it trained.
    assert moved["staged_bytes"] == 3 * sample_campaign.SHARD_BYTES
    assert moved["entry_point"] == "traingrid_train.py"
    assert moved["image"].endswith(
        f".dkr.ecr.{moved['region']}.amazonaws.com/traingrid-sagemaker:0.1.0")
    assert moved["hyperparameters"]["num_epochs"] == "90"
    assert not any(k.startswith("sagemaker_") for k in moved["hyperparameters"])
    # First fewer instances in the same region (down to the campaign's 5), then another
    # region with the 10 asked for.
    assert [(a["region"], a.get("instance_count")) for a in moved["attempts"]] == [
        ("us-west-2", 10), ("us-west-2", 5), (moved["region"], None)]
    assert "CapacityError" in moved["attempts"][0]["reason"]
    described = outcome.emulator.client("sagemaker", moved["region"]).describe_training_job(
        TrainingJobName=moved["job_name"])
    assert described["ResourceConfig"]["InstanceCount"] == 10
    # The data was copied next to the job: SageMaker reads its input in its own region.
    described = outcome.emulator.client("sagemaker", moved["region"]).describe_training_job(
        TrainingJobName=moved["job_name"])
    s3_input = described["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"]
    assert moved["region"] in s3_input
    bucket, _, prefix = s3_input.removeprefix("s3://").partition("/")
    copied = outcome.emulator.client("s3", moved["region"]).list_objects_v2(
        Bucket=bucket, Prefix=prefix)["KeyCount"]
    assert copied == 3
    others = {r: j for r, j in jobs_by_data_region(outcome).items() if r != "us-west-2"}
    assert all(j["region"] == r and j["status"] == "Completed" for r, j in others.items())


def test_a_quota_refusal_elsewhere_moves_that_region(run_campaign):
    outcome = run_campaign("sagemaker-quota", fault_region="eu-central-1")
    assert outcome.execution["status"] == "SUCCEEDED"
    moved = jobs_by_data_region(outcome)["eu-central-1"]
    assert moved["region"] != "eu-central-1"
    assert "ResourceLimitExceeded" in moved["attempts"][0]["reason"]


def test_a_failing_region_fails_the_run_and_keeps_the_others(run_campaign):
    outcome = run_campaign("sagemaker-job-failed")
    execution = outcome.execution
    assert (execution["status"], execution["error"]) == ("FAILED", "RegionFailed")
    assert "1 of 4 region(s) failed: us-west-2" in execution["cause"]
    assert "AlgorithmError" in execution["cause"]
    jobs = jobs_by_data_region(outcome)
    assert jobs["us-west-2"]["status"] == "Failed"
    assert all(jobs[r]["status"] == "Completed" and jobs[r]["artifacts"]
               for r in REGIONS - {"us-west-2"})
    assert outcome.report["leaked_resources"] == []


def test_a_job_that_cannot_be_checked_is_stopped_by_the_run_itself(emulated):
    emulator, deployment = emulated("happy")
    emulator.set_faults(state_faults={"AwaitRegionJob": StateFault("service-error")})
    sample_campaign.seed(deployment)
    sample_campaign.upload_and_mark(emulator, deployment)

    outcome = finish(emulator, deployment, "CampaignFanoutStateMachineArn")

    assert outcome.execution["status"] == "FAILED"
    for region in REGIONS:
        (job,) = emulator.client("sagemaker", region).list_training_jobs()[
            "TrainingJobSummaries"]
        assert job["TrainingJobStatus"] in ("Stopping", "Stopped"), region
    # Stopped by the run's StopRegionJob, not left for the janitor.
    assert [a for a in outcome.report["janitor"]["actions"] if a["action"] == "stop"] == []
    assert outcome.report["leaked_resources"] == []
    assert missing_permissions(outcome.stack, outcome.calls) == []


def test_a_fanout_for_an_unknown_campaign_fails_readably(emulated):
    emulator, deployment = emulated("happy")
    sfn = emulator.client("stepfunctions")
    arn = deployment.stack.outputs["CampaignFanoutStateMachineArn"]
    sfn.start_execution(stateMachineArn=arn, name="no-such-campaign-1",
                        input=json.dumps({"campaign": "no-such-campaign", "settle_s": 0}))
    (execution,) = finish(emulator, deployment, "CampaignFanoutStateMachineArn").report[
        "executions"]
    assert (execution["status"], execution["error"]) == ("FAILED", "RequestInvalid")
    assert "/campaign: no such campaign" in execution["cause"]


def test_a_repeated_marker_registers_once_and_starts_one_fanout(run_campaign):
    outcome = run_campaign("happy", repeat_markers=2)
    assert len(outcome.report["executions"]) == 1
    with transaction(outcome.deployment.database_url) as session:
        (campaign,) = CampaignRepository(session).overview()
    assert len(campaign["datasets"]) == 4


def test_each_campaign_function_calls_only_what_its_role_allows(run_campaign):
    outcome = run_campaign("sagemaker-capacity")
    assert outcome.calls
    assert missing_permissions(outcome.stack, outcome.calls) == []


def test_with_managed_spot_the_cheapest_plan_trains_where_spot_is_cheapest(emulated):
    emulator, deployment = emulated("happy", parameters={"ManagedSpot": "true"})
    sample_campaign.seed(deployment)
    with transaction(deployment.database_url) as session:
        # eu-west-1 is dearer than us-east-1 on demand, and the cheapest on spot.
        session.execute(update(RegionPrice).where(RegionPrice.region_code == "eu-west-1")
                        .values(spot_usd_per_hour=5.0))
        session.execute(update(Campaign).values(placement="cheapest"))
    sample_campaign.upload_and_mark(emulator, deployment)
    outcome = finish(emulator, deployment, "CampaignFanoutStateMachineArn")

    assert outcome.execution["status"] == "SUCCEEDED", outcome.execution["cause"]
    jobs = jobs_by_data_region(outcome)
    assert {job["region"] for job in jobs.values()} == {"eu-west-1"}
    assert jobs["us-east-1"]["placement_reason"].startswith(
        "cheapest: eu-west-1 at $100.00 (including $0.00 to copy")
    assert "; spot price) vs $168.92 in us-east-1" in jobs["us-east-1"]["placement_reason"]
    described = emulator.client("sagemaker", "eu-west-1").describe_training_job(
        TrainingJobName=jobs["us-east-1"]["job_name"])
    assert described["EnableManagedSpotTraining"] is True
    assert outcome.report["leaked_resources"] == []


def test_a_5_tb_region_streams_its_data_with_a_small_volume(emulated):
    emulator, deployment = emulated("happy")
    sample_campaign.seed(deployment)
    bucket = deployment.regional["us-west-2"].outputs["CampaignBucketName"]
    key = f"campaigns/{CAMPAIGN}/us-west-2/drive-all.tfrecord"
    s3_backends[ACCOUNT_ID]["aws"].put_object(bucket, key, b"d" * 1024)
    declare_size(ACCOUNT_ID, bucket, key, 5 * 10**12)
    sample_campaign.upload_and_mark(emulator, deployment)

    outcome = finish(emulator, deployment, "CampaignFanoutStateMachineArn")

    assert outcome.execution["status"] == "SUCCEEDED", outcome.execution["cause"]
    jobs = jobs_by_data_region(outcome)
    received = emulator.client("sagemaker", "us-west-2").describe_training_job(
        TrainingJobName=jobs["us-west-2"]["job_name"])
    assert received["AlgorithmSpecification"]["TrainingInputMode"] == "FastFile"
    assert received["InputDataConfig"][0]["InputMode"] == "FastFile"
    assert received["ResourceConfig"]["VolumeSizeInGB"] == 50
    assert jobs["us-west-2"]["input_reason"].startswith("FastFile: 5.0 TB in 4 objects is over")
    assert (jobs["us-west-2"]["input_mode"], jobs["us-west-2"]["volume_size_gb"]) == (
        "FastFile", 50)
    assert {(j["input_mode"], j["volume_size_gb"]) for r, j in jobs.items()
            if r != "us-west-2"} == {("File", 50)}
    assert jobs["eu-west-1"]["input_reason"].startswith("File: 98.3 KB in 3 objects")


def test_a_moved_job_stages_a_6_gb_object_and_5000_small_ones(emulated):
    emulator, deployment = emulated("sagemaker-capacity")
    sample_campaign.seed(deployment)
    bucket = deployment.regional["us-west-2"].outputs["CampaignBucketName"]
    prefix = f"campaigns/{CAMPAIGN}/us-west-2/"
    backend = s3_backends[ACCOUNT_ID]["aws"]
    backend.put_object(bucket, prefix + "huge/drive-all.tfrecord", b"h" * 1024)
    declare_size(ACCOUNT_ID, bucket, prefix + "huge/drive-all.tfrecord", 6 * 10**9)
    for index in range(5000):
        backend.put_object(bucket, f"{prefix}small/frame-{index:05d}.jpg", b"s" * 100)
    sample_campaign.upload_and_mark(emulator, deployment)

    outcome = finish(emulator, deployment, "CampaignFanoutStateMachineArn")

    assert outcome.execution["status"] == "SUCCEEDED", outcome.execution["cause"]
    moved = jobs_by_data_region(outcome)["us-west-2"]
    assert moved["status"] == "Completed" and moved["region"] != "us-west-2"
    small_shards = sample_campaign.SHARDS_PER_REGION * sample_campaign.SHARD_BYTES
    assert moved["staged_bytes"] == 6 * 10**9 + 5000 * 100 + small_shards
    target = outcome.emulator.client("s3", moved["region"])
    staged = [o for page in target.get_paginator("list_objects_v2").paginate(
        Bucket=deployment.regional[moved["region"]].outputs["ArtifactBucketName"],
        Prefix=prefix) for o in page.get("Contents", [])]
    assert len(staged) == 5000 + 1 + sample_campaign.SHARDS_PER_REGION
    assert {o["Key"]: o["Size"] for o in staged}[prefix + "huge/drive-all.tfrecord"] == 6 * 10**9
    # Copied by bounded calls that go on where the last one stopped (in the region's branch,
    # an execution of its own).
    sfn = outcome.emulator.client("stepfunctions")
    (branch,) = [e for e in sfn.list_executions(stateMachineArn=deployment.stack.outputs[
        "CampaignRegionStateMachineArn"])["executions"] if e["name"].endswith("-us-west-2")]
    events = report.history(outcome.emulator, branch["executionArn"])
    calls = [e for e in events if e["type"] == "TaskStateEntered"
             and e["stateEnteredEventDetails"]["name"] == "StageInput"]
    assert len(calls) >= 6
