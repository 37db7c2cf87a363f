"""SageMaker training jobs that start, download, train, upload and end over simulated time,
leaving their model artifact in S3, with the SageMaker faults acting in the fault region only."""

from __future__ import annotations

import io
import tarfile
import weakref
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from traingrid_local.emulator import fault_injection, sagemaker
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.fault_injection import FaultPlan
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator

from .conftest import StartEmulator
from .helpers import DEADLINE_S, wait_until

ROLE = f"arn:aws:iam::{ACCOUNT_ID}:role/sagemaker-training"
BUCKET = "traingrid-models"
ORDER = ["Starting", "Downloading", "Training", "Uploading", "Stopping", "Completed", "Failed",
         "Stopped"]
HOROVOD = {
    "sagemaker_mpi_enabled": "true",
    "sagemaker_mpi_num_of_processes_per_host": "8",
    "sagemaker_mpi_custom_mpi_options": "-x HOROVOD_FUSION_THRESHOLD=16777216 -x NCCL_MIN_NRINGS=8",
    "sagemaker_program": '"train.py"',
    "epochs": "90",
}


_CLIENTS: weakref.WeakKeyDictionary[Emulator, dict[tuple[str, str | None], Any]] = (
    weakref.WeakKeyDictionary())


def _client(emulator: Emulator, service: str, region: str | None = None) -> Any:
    """The session's client for ``service`` in ``region``, created once (polls call it often)."""
    clients = _CLIENTS.setdefault(emulator, {})
    if (service, region) not in clients:
        clients[service, region] = emulator.client(service, region)
    return clients[service, region]


@pytest.fixture
def short_training(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(sagemaker, "TRAINING_SECONDS", 300)
    return 300


def _bucket(emulator: Emulator, region: str, name: str = BUCKET) -> str:
    location = {} if region == "us-east-1" else {
        "CreateBucketConfiguration": {"LocationConstraint": region}}
    _client(emulator, "s3", region).create_bucket(Bucket=name, **location)
    return name


def _request(name: str, bucket: str = BUCKET, **overrides: Any) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/"
                             "pytorch-training:2.1.0-gpu-py310",
            "TrainingInputMode": "File",
            "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=([0-9.]+)"}],
        },
        "RoleArn": ROLE,
        "HyperParameters": HOROVOD,
        "InputDataConfig": [{
            "ChannelName": "train",
            "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/datasets/imagenet/",
                "S3DataDistributionType": "FullyReplicated"}},
        }],
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/models"},
        "ResourceConfig": {"InstanceType": "ml.p3.16xlarge", "InstanceCount": 2,
                           "VolumeSizeInGB": 100},
        "StoppingCondition": {"MaxRuntimeInSeconds": 86400},
        **overrides,
    }


def _create(emulator: Emulator, name: str, region: str | None = None, **overrides: Any) -> str:
    return _client(emulator, "sagemaker", region).create_training_job(
        **_request(name, **overrides))["TrainingJobArn"]


def _describe(emulator: Emulator, name: str, region: str | None = None) -> dict[str, Any]:
    return _client(emulator, "sagemaker", region).describe_training_job(TrainingJobName=name)


def _wait_for(emulator: Emulator, name: str, *statuses: str, region: str | None = None,
              secondary: bool = False, timeout: float = DEADLINE_S) -> dict[str, Any]:
    client = _client(emulator, "sagemaker", region)
    key = "SecondaryStatus" if secondary else "TrainingJobStatus"
    return wait_until(
        lambda: (job := client.describe_training_job(TrainingJobName=name))[key] in statuses
        and job,
        timeout=timeout, what=f"training job {name} to be {'/'.join(statuses)}",
    )


def _wait_for_end(emulator: Emulator, name: str, region: str | None = None) -> dict[str, Any]:
    return _wait_for(emulator, name, *sagemaker.TERMINAL, region=region)


def _transitions(job: dict[str, Any]) -> list[str]:
    return [t["Status"] for t in job["SecondaryStatusTransitions"]]


def _lasted(job: dict[str, Any], status: str) -> float:
    [transition] = [t for t in job["SecondaryStatusTransitions"] if t["Status"] == status]
    return (transition["EndTime"] - transition["StartTime"]).total_seconds()


def _keys(emulator: Emulator, region: str, bucket: str = BUCKET) -> list[str]:
    listing = _client(emulator, "s3", region).list_objects_v2(Bucket=bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def _set_faults(emulator: Emulator, names: set[str], region: str) -> None:
    plan = FaultPlan(frozenset(names), fault_region=region)
    emulator.fault_plan = plan
    fault_injection.set_plan(plan)


def _error(raised: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = raised.value.response["Error"]
    return error["Code"], error["Message"]


# --- The progression ---------------------------------------------------------------------


def test_a_job_moves_through_its_secondary_statuses_to_completed(
    start_emulator: StartEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each status lasts 200 simulated seconds; the test holds the clock while it looks and lets
    # it run 50 simulated seconds at a time (a waiter's deadline stops the clock until it has
    # woken), so no status passes unseen however slow the machine.
    for phase in ("STARTING", "DOWNLOADING", "TRAINING", "UPLOADING"):
        monkeypatch.setattr(sagemaker, f"{phase}_SECONDS", 200)
    emulator = start_emulator()
    _bucket(emulator, "us-east-1")
    seen: list[tuple[str, str]] = []
    with CLOCK.paused():
        _create(emulator, "resnet50-run-1")
        for _ in range(100):
            job = _describe(emulator, "resnet50-run-1")
            state = (job["TrainingJobStatus"], job["SecondaryStatus"])
            if not seen or seen[-1] != state:
                seen.append(state)
            if state[0] in sagemaker.TERMINAL:
                break
            CLOCK.wait(50)

    assert seen == [("InProgress", "Starting"), ("InProgress", "Downloading"),
                    ("InProgress", "Training"), ("InProgress", "Uploading"),
                    ("Completed", "Completed")]


def test_a_completed_job_reports_its_transitions_times_and_artifact(
    emulator: Emulator, short_training: float
) -> None:
    _bucket(emulator, "us-east-1")
    _create(emulator, "resnet50-run-2")

    job = _wait_for_end(emulator, "resnet50-run-2")

    assert job["TrainingJobStatus"] == job["SecondaryStatus"] == "Completed"
    assert _transitions(job) == ["Starting", "Downloading", "Training", "Uploading", "Completed"]
    for status, seconds in [("Starting", sagemaker.STARTING_SECONDS),
                            ("Downloading", sagemaker.DOWNLOADING_SECONDS),
                            ("Training", short_training),
                            ("Uploading", sagemaker.UPLOADING_SECONDS), ("Completed", 0)]:
        assert _lasted(job, status) == pytest.approx(seconds, abs=0.01)
    transitions = {t["Status"]: t for t in job["SecondaryStatusTransitions"]}
    assert transitions["Training"]["StatusMessage"]
    assert job["TrainingStartTime"] == transitions["Downloading"]["StartTime"]
    assert job["TrainingEndTime"] == transitions["Completed"]["StartTime"]
    assert job["LastModifiedTime"] == job["TrainingEndTime"]
    assert job["TrainingStartTime"] - job["CreationTime"] == pytest.approx(
        timedelta(seconds=sagemaker.STARTING_SECONDS), abs=timedelta(milliseconds=10))
    ran = sagemaker.DOWNLOADING_SECONDS + short_training + sagemaker.UPLOADING_SECONDS
    assert job["TrainingTimeInSeconds"] == job["BillableTimeInSeconds"] == pytest.approx(ran, abs=1)
    assert job["ModelArtifacts"] == {
        "S3ModelArtifacts": f"s3://{BUCKET}/models/resnet50-run-2/output/model.tar.gz"}
    assert "FailureReason" not in job


def test_a_running_job_has_no_end_artifact_or_billable_time(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=2000)  # two simulated hours of training take 3.6 s
    _bucket(emulator, "us-east-1")
    _create(emulator, "resnet50-run-3")

    job = _wait_for(emulator, "resnet50-run-3", "Training", secondary=True)

    assert job["TrainingJobStatus"] == "InProgress"
    assert "TrainingStartTime" in job
    for absent in ("TrainingEndTime", "ModelArtifacts", "BillableTimeInSeconds",
                   "TrainingTimeInSeconds", "FailureReason"):
        assert absent not in job
    current = job["SecondaryStatusTransitions"][-1]
    assert current["Status"] == "Training" and "EndTime" not in current
    assert job["LastModifiedTime"] == current["StartTime"]
    assert _keys(emulator, "us-east-1") == []


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1"])
def test_the_model_artifact_is_written_to_s3_in_the_jobs_region(
    emulator: Emulator, region: str
) -> None:
    _bucket(emulator, region)
    _create(emulator, "resnet50-run-4", region)

    job = _wait_for_end(emulator, "resnet50-run-4", region)

    assert job["TrainingJobStatus"] == "Completed"
    assert job["TrainingJobArn"].startswith(f"arn:aws:sagemaker:{region}:{ACCOUNT_ID}:")
    key = "models/resnet50-run-4/output/model.tar.gz"
    assert job["ModelArtifacts"]["S3ModelArtifacts"] == f"s3://{BUCKET}/{key}"
    assert _keys(emulator, region) == [key]
    body = _client(emulator, "s3", region).get_object(Bucket=BUCKET, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as archive:
        assert sorted(archive.getnames()) == ["model.pth", "training_summary.json"]


def test_an_output_bucket_that_does_not_exist_fails_the_job(emulator: Emulator) -> None:
    _create(emulator, "resnet50-run-5", bucket="no-such-bucket")

    job = _wait_for_end(emulator, "resnet50-run-5")

    assert job["TrainingJobStatus"] == job["SecondaryStatus"] == "Failed"
    assert job["FailureReason"].startswith("ClientError: ")
    assert "bucket does not exist" in job["FailureReason"]
    assert _transitions(job) == ["Starting", "Downloading", "Training", "Uploading", "Failed"]
    assert "ModelArtifacts" not in job


def test_an_output_bucket_in_another_region_fails_the_job(emulator: Emulator) -> None:
    _bucket(emulator, "eu-central-1")
    _create(emulator, "resnet50-run-6", "eu-west-1")

    job = _wait_for_end(emulator, "resnet50-run-6", "eu-west-1")

    assert job["TrainingJobStatus"] == "Failed"
    assert job["FailureReason"].startswith("ClientError: ")
    assert "eu-central-1" in job["FailureReason"]
    assert _keys(emulator, "eu-central-1") == []


# --- Names -------------------------------------------------------------------------------


def test_a_duplicate_name_is_rejected_in_the_same_region_only(emulator: Emulator) -> None:
    _bucket(emulator, "us-east-1")
    first = _create(emulator, "resnet50-run-7")

    with pytest.raises(ClientError) as duplicate:
        _create(emulator, "resnet50-run-7", HyperParameters={"epochs": "1"})

    code, message = _error(duplicate)
    assert code == "ValidationException"
    assert message.startswith("Training job names must be unique within an AWS account and "
                              "region")
    assert first in message
    assert _describe(emulator, "resnet50-run-7")["HyperParameters"] == HOROVOD  # unchanged
    assert _create(emulator, "resnet50-run-7", "eu-west-1").endswith("/resnet50-run-7")


@pytest.mark.parametrize("name", ["resnet50_run", "-resnet50", "resnet50-", "resnet.50"])
def test_a_name_outside_the_pattern_is_rejected(emulator: Emulator, name: str) -> None:
    client = _client(emulator, "sagemaker")

    with pytest.raises(ClientError) as invalid:
        client.create_training_job(**_request(name))

    code, message = _error(invalid)
    assert code == "ValidationException"
    assert f"Value '{name}' at 'trainingJobName'" in message
    assert client.list_training_jobs()["TrainingJobSummaries"] == []


# --- Stopping ----------------------------------------------------------------------------


def test_stopping_a_starting_job_goes_through_stopping_to_stopped(
    start_emulator: StartEmulator,
) -> None:
    # 200 simulated seconds per real second: Starting lasts 1.2 s, Stopping 0.6 s.
    emulator = start_emulator(speed=200)
    _bucket(emulator, "us-east-1")
    _create(emulator, "resnet50-run-8")
    client = _client(emulator, "sagemaker")

    client.stop_training_job(TrainingJobName="resnet50-run-8")
    stopping = _describe(emulator, "resnet50-run-8")
    client.stop_training_job(TrainingJobName="resnet50-run-8")  # again: accepted
    stopped = _wait_for_end(emulator, "resnet50-run-8")

    assert (stopping["TrainingJobStatus"], stopping["SecondaryStatus"]) == ("Stopping",
                                                                          "Stopping")
    assert (stopped["TrainingJobStatus"], stopped["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert _transitions(stopped) == ["Starting", "Stopping", "Stopped"]
    assert _lasted(stopped, "Stopping") == pytest.approx(sagemaker.STOPPING_SECONDS, abs=0.01)
    for absent in ("TrainingStartTime", "ModelArtifacts", "BillableTimeInSeconds"):
        assert absent not in stopped


def test_stopping_a_training_job_bills_until_it_stopped(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=2000)
    _bucket(emulator, "us-east-1")
    _create(emulator, "resnet50-run-9")
    _wait_for(emulator, "resnet50-run-9", "Training", secondary=True)

    _client(emulator, "sagemaker").stop_training_job(TrainingJobName="resnet50-run-9")
    job = _wait_for_end(emulator, "resnet50-run-9")

    assert job["TrainingJobStatus"] == "Stopped"
    assert _transitions(job) == ["Starting", "Downloading", "Training", "Stopping", "Stopped"]
    assert _lasted(job, "Training") < sagemaker.TRAINING_SECONDS
    ran = (job["TrainingEndTime"] - job["TrainingStartTime"]).total_seconds()
    assert job["BillableTimeInSeconds"] == pytest.approx(ran, abs=1)
    assert "ModelArtifacts" not in job
    assert _keys(emulator, "us-east-1") == []


@pytest.mark.parametrize("bucket, status", [(BUCKET, "Completed"), ("no-bucket", "Failed")])
def test_a_finished_job_cannot_be_stopped(emulator: Emulator, bucket: str, status: str) -> None:
    _bucket(emulator, "us-east-1")
    _create(emulator, "resnet50-run-10", bucket=bucket)
    _wait_for_end(emulator, "resnet50-run-10")

    with pytest.raises(ClientError) as refused:
        _client(emulator, "sagemaker").stop_training_job(TrainingJobName="resnet50-run-10")

    assert _error(refused) == (
        "ValidationException",
        f"The request was rejected because the training job is in status {status}.")
    assert _describe(emulator, "resnet50-run-10")["TrainingJobStatus"] == status


def test_stopping_an_unknown_job_fails(emulator: Emulator) -> None:
    with pytest.raises(ClientError) as missing:
        _client(emulator, "sagemaker").stop_training_job(TrainingJobName="no-such-job")

    assert _error(missing)[0] == "ValidationException"


# --- Listing and describing --------------------------------------------------------------


def test_list_training_jobs_filters_on_the_current_status(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    _bucket(emulator, "us-east-1")
    _create(emulator, "finished")
    # Not described before listing: the listing itself sees that it ended.
    CLOCK.sleep(sagemaker.STARTING_SECONDS + sagemaker.DOWNLOADING_SECONDS
                + sagemaker.TRAINING_SECONDS + sagemaker.UPLOADING_SECONDS + 60)
    monkeypatch.setattr(sagemaker, "TRAINING_SECONDS", 30 * 24 * 3600)
    _create(emulator, "running")
    _create(emulator, "stopped")
    client = _client(emulator, "sagemaker")
    client.stop_training_job(TrainingJobName="stopped")
    _wait_for_end(emulator, "stopped")

    def names(status: str) -> list[str]:
        summaries = client.list_training_jobs(StatusEquals=status)["TrainingJobSummaries"]
        return [s["TrainingJobName"] for s in summaries]

    assert names("Completed") == ["finished"]
    assert names("InProgress") == ["running"]
    assert names("Stopped") == ["stopped"]
    assert names("Failed") == names("Stopping") == []
    summaries = client.list_training_jobs()["TrainingJobSummaries"]
    assert {s["TrainingJobName"]: s["TrainingJobStatus"] for s in summaries} == {
        "finished": "Completed", "running": "InProgress", "stopped": "Stopped"}
    assert "TrainingEndTime" not in next(s for s in summaries if s["TrainingJobName"] == "running")


def test_describe_returns_every_request_field(emulator: Emulator) -> None:
    _bucket(emulator, "us-east-1")
    request = _request(
        "resnet50-run-11",
        Environment={"NCCL_DEBUG": "INFO"},
        RetryStrategy={"MaximumRetryAttempts": 2},
        EnableManagedSpotTraining=True,
        StoppingCondition={"MaxRuntimeInSeconds": 86400, "MaxWaitTimeInSeconds": 172800},
        CheckpointConfig={"S3Uri": f"s3://{BUCKET}/checkpoints/run-11",
                          "LocalPath": "/opt/ml/checkpoints"},
        VpcConfig={"SecurityGroupIds": ["sg-0123456789abcdef0"],
                   "Subnets": ["subnet-0123456789abcdef0"]},
        EnableInterContainerTrafficEncryption=True,
        Tags=[{"Key": "traingrid:run", "Value": "run-11"}],
    )
    client = _client(emulator, "sagemaker")
    arn = client.create_training_job(**request)["TrainingJobArn"]

    job = _describe(emulator, "resnet50-run-11")

    for field in ("HyperParameters", "AlgorithmSpecification", "RoleArn", "InputDataConfig",
                  "OutputDataConfig", "ResourceConfig", "StoppingCondition", "CheckpointConfig",
                  "VpcConfig", "Environment", "RetryStrategy", "EnableManagedSpotTraining",
                  "EnableInterContainerTrafficEncryption"):
        assert job[field] == request[field], field
    assert job["HyperParameters"]["sagemaker_mpi_enabled"] == "true"
    assert job["EnableNetworkIsolation"] is False
    assert client.list_tags(ResourceArn=arn)["Tags"] == request["Tags"]


# --- Faults ------------------------------------------------------------------------------


def _run_in(emulator: Emulator, regions: list[str]) -> dict[str, dict[str, Any]]:
    """One job per region, each writing to a bucket in its region; their final descriptions."""
    for region in regions:
        _create(emulator, "resnet50", region,
                bucket=_bucket(emulator, region, f"models-{region}"))
    return {region: _wait_for_end(emulator, "resnet50", region) for region in regions}


def test_fault_sagemaker_capacity_fails_jobs_in_the_fault_region_while_starting(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(faults={"sagemaker-capacity"})

    jobs = _run_in(emulator, ["us-west-2", "us-east-1"])

    failed = jobs["us-west-2"]
    assert failed["TrainingJobStatus"] == failed["SecondaryStatus"] == "Failed"
    assert failed["FailureReason"].startswith(
        "CapacityError: Unable to provision requested ML compute capacity. Please retry using "
        "a different ML instance type.")
    assert _transitions(failed) == ["Starting", "Failed"]
    for absent in ("TrainingStartTime", "ModelArtifacts", "BillableTimeInSeconds"):
        assert absent not in failed
    assert jobs["us-east-1"]["TrainingJobStatus"] == "Completed"


def test_fault_sagemaker_job_failed_fails_jobs_in_the_fault_region_while_training(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(faults={"sagemaker-job-failed"})

    jobs = _run_in(emulator, ["us-west-2", "eu-central-1"])

    failed = jobs["us-west-2"]
    assert failed["TrainingJobStatus"] == failed["SecondaryStatus"] == "Failed"
    reason = failed["FailureReason"]
    assert reason.startswith("AlgorithmError: mpirun exited with code 1 on algo-1")
    assert "-np 16" in reason and HOROVOD["sagemaker_mpi_custom_mpi_options"] in reason
    assert len(reason) <= 1024  # the API's limit
    assert _transitions(failed) == ["Starting", "Downloading", "Training", "Failed"]
    assert _lasted(failed, "Training") == pytest.approx(sagemaker.ALGORITHM_FAILS_AFTER_SECONDS,
                                                        abs=0.01)
    assert failed["BillableTimeInSeconds"] == pytest.approx(
        sagemaker.DOWNLOADING_SECONDS + sagemaker.ALGORITHM_FAILS_AFTER_SECONDS, abs=1)
    assert "ModelArtifacts" not in failed
    assert _keys(emulator, "us-west-2", "models-us-west-2") == []
    assert jobs["eu-central-1"]["TrainingJobStatus"] == "Completed"


@pytest.mark.parametrize("fault", ["sagemaker-capacity", "sagemaker-job-failed"])
def test_a_training_fault_acts_in_the_chosen_fault_region(
    emulator: Emulator, fault: str
) -> None:
    _set_faults(emulator, {fault}, "eu-west-1")

    jobs = _run_in(emulator, ["us-west-2", "eu-west-1"])

    assert jobs["us-west-2"]["TrainingJobStatus"] == "Completed"
    assert jobs["eu-west-1"]["TrainingJobStatus"] == "Failed"
    assert jobs["eu-west-1"]["FailureReason"].split(":")[0] in ("CapacityError", "AlgorithmError")


def test_fault_sagemaker_quota_refuses_the_job_in_the_fault_region(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(faults={"sagemaker-quota"})
    _bucket(emulator, "us-west-2")

    with pytest.raises(ClientError) as refused:
        _create(emulator, "resnet50-run-12", "us-west-2",
                ResourceConfig={"InstanceType": "ml.p3.16xlarge", "InstanceCount": 10,
                                "VolumeSizeInGB": 100})

    code, message = _error(refused)
    assert code == "ResourceLimitExceeded"
    assert message.startswith(
        "The account-level service limit 'ml.p3.16xlarge for training job usage' is 0 Instances, "
        "with current utilization of 0 Instances and a request delta of 10 Instances.")
    west = _client(emulator, "sagemaker", "us-west-2")
    assert west.list_training_jobs()["TrainingJobSummaries"] == []
    assert _create(emulator, "resnet50-run-12", "us-east-1")


def test_fault_sagemaker_quota_follows_the_fault_region(emulator: Emulator) -> None:
    _set_faults(emulator, {"sagemaker-quota"}, "eu-west-1")

    assert _create(emulator, "resnet50-run-13", "us-west-2")
    with pytest.raises(ClientError) as refused:
        _create(emulator, "resnet50-run-13", "eu-west-1")

    assert _error(refused)[0] == "ResourceLimitExceeded"


def test_a_jobs_fate_is_decided_when_it_is_created(emulator: Emulator) -> None:
    _bucket(emulator, "us-west-2")
    _create(emulator, "healthy", "us-west-2")
    _set_faults(emulator, {"sagemaker-job-failed"}, "us-west-2")
    _create(emulator, "doomed", "us-west-2")
    _set_faults(emulator, set(), "us-west-2")

    assert _wait_for_end(emulator, "healthy", "us-west-2")["TrainingJobStatus"] == "Completed"
    assert _wait_for_end(emulator, "doomed", "us-west-2")["TrainingJobStatus"] == "Failed"
