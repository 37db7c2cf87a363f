"""A fan-out's curves by region, without AWS: which job is a region's, the bins CloudWatch is
asked for, and each region's entry from what SageMaker and CloudWatch answer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from traingrid.errors import AwsServiceError, ResourceNotFound
from traingrid.naming import job_name
from traingrid.runs import region_curves
from traingrid.runs.metrics import MetricsQuery, fanout_curves

RUN = "av-drive-2026-11-20261128T1300-0123456789ab"
T0 = datetime(2026, 11, 28, 13, 0, tzinfo=UTC)
PLANNED = [{"requested_region": "eu-west-1", "region": "eu-west-1",
            "fallbacks": ["eu-central-1"]},
           {"requested_region": "us-east-1", "region": "us-east-1", "fallbacks": []}]


def test_a_period_is_a_whole_number_of_minutes() -> None:
    assert [region_curves.period(s) for s in (1, 60, 61, 600, 601)] == [60, 60, 120, 600, 660]


def test_a_running_regions_job_is_its_newest_attempt_in_the_regions_it_may_train_in() -> None:
    listed = {
        "eu-west-1": [{"TrainingJobName": job_name(RUN, "eu-west-1", 1),
                       "CreationTime": T0}],
        "eu-central-1": [{"TrainingJobName": job_name(RUN, "eu-west-1", 2),
                          "CreationTime": T0 + timedelta(minutes=9)},
                         # another run's job whose name holds this one's
                         {"TrainingJobName": job_name("pre-" + RUN, "eu-west-1", 3),
                          "CreationTime": T0 + timedelta(hours=1)}],
    }
    asked: list[tuple[str, str]] = []

    def list_named(region: str, part: str) -> list[dict[str, Any]]:
        asked.append((region, part))
        return [job for job in listed.get(region, []) if part in job["TrainingJobName"]]

    assert region_curves.current_job(RUN, PLANNED[0], None, list_named) == (
        "eu-central-1", job_name(RUN, "eu-west-1", 2))
    assert [region for region, _ in asked] == ["eu-west-1", "eu-central-1"]
    # A branch that reported its job is not looked for; one with none started has none.
    assert region_curves.current_job(RUN, PLANNED[0], {"region": "eu-west-1",
                                                       "job_name": "j"}, list_named) == (
        "eu-west-1", "j")
    assert region_curves.current_job(RUN, PLANNED[1], None, list_named) is None


def test_each_region_has_its_jobs_curves_as_cloudwatch_answers() -> None:
    name = job_name(RUN, "eu-west-1", 1)
    start = T0 + timedelta(minutes=10)
    asked: list[tuple[str, list[dict[str, Any]], datetime, datetime]] = []

    def describe(region: str, job: str) -> dict[str, Any]:
        return {"TrainingJobName": job, "TrainingJobStatus": "InProgress",
                "CreationTime": T0, "TrainingStartTime": start,
                "FinalMetricDataList": [{"MetricName": "train:loss", "Value": 2.5,
                                         "Timestamp": start}],
                "TensorBoardOutputConfig": {"S3OutputPath": f"s3://b/tensorboard/{job}/"}}

    def metric_data(region: str, queries: list[dict[str, Any]], low: datetime,
                    high: datetime) -> dict[str, list[list[float]]]:
        asked.append((region, queries, low, high))
        return {"loss": [[start.timestamp(), 6.9], [start.timestamp() + 60, 6.1234567]],
                "images_per_s": []}

    answer = fanout_curves(
        RUN, PLANNED, {}, MetricsQuery(), T0 + timedelta(hours=2), describe,
        lambda region, part: ([{"TrainingJobName": name, "CreationTime": T0}]
                              if region == "eu-west-1" else []), metric_data)

    # 110 minutes in at most 300 bins: 22 s, a minute for CloudWatch.
    assert answer["step"] == 60 and answer["nodes"] == {}
    west = answer["regions"]["eu-west-1"]
    assert west == {
        "region": "eu-west-1", "job_name": name, "status": "InProgress",
        "source": f"cloudwatch:eu-west-1:/aws/sagemaker/TrainingJobs:TrainingJobName={name}",
        "loss": [[start.timestamp(), 6.9], [start.timestamp() + 60, 6.123457]],
        "final": {"loss": 2.5}, "tensorboard": f"s3://b/tensorboard/{name}/"}
    assert answer["regions"]["us-east-1"]["status"] == "NotStarted"
    ((region, queries, low, high),) = asked
    assert region == "eu-west-1" and low == start and high == T0 + timedelta(hours=2, minutes=1)
    assert {q["MetricStat"]["Metric"]["MetricName"]: q["Id"] for q in queries} == {
        "train:loss": "loss", "train:images_per_second": "images_per_s"}
    assert {(d["Name"], d["Value"]) for q in queries
            for d in q["MetricStat"]["Metric"]["Dimensions"]} == {("TrainingJobName", name)}


def test_a_job_that_cannot_be_described_is_said_so_and_the_others_answered() -> None:
    def describe(region: str, job: str) -> dict[str, Any]:
        if region == "us-east-1":
            raise ResourceNotFound("SageMaker.DescribeTrainingJob: ResourceNotFound: gone")
        return {"TrainingJobStatus": "Completed", "CreationTime": T0}

    reported = {"eu-west-1": {"region": "eu-west-1", "job_name": "w"},
                "us-east-1": {"region": "us-east-1", "job_name": "e"}}
    answer = fanout_curves(RUN, PLANNED, reported, MetricsQuery(), T0 + timedelta(hours=1),
                           describe, lambda region, part: [], lambda *_: {})
    assert answer["regions"]["eu-west-1"]["status"] == "Completed"
    east = answer["regions"]["us-east-1"]
    assert east["status"] == "Unknown" and "gone" in east["error"]


def test_a_region_whose_jobs_or_curves_cannot_be_read_is_said_so_and_the_others_answered(
        ) -> None:
    """ListTrainingJobs refused in one region, GetMetricData throttled in another: each says
    so in its own entry; the answer stands."""
    def list_named(region: str, part: str) -> list[dict[str, Any]]:
        raise AwsServiceError("SageMaker", "ListTrainingJobs", "AccessDeniedException", "no")

    def metric_data(region: str, *_: Any) -> dict[str, Any]:
        raise AwsServiceError("CloudWatch", "GetMetricData", "Throttling", "slow down")

    def describe(region: str, job: str) -> dict[str, Any]:
        return {"TrainingJobStatus": "InProgress", "CreationTime": T0,
                "TrainingStartTime": T0, "FinalMetricDataList": []}

    reported = {"eu-west-1": {"region": "eu-west-1", "job_name": "w"}}  # the other: listed
    answer = fanout_curves(RUN, PLANNED, reported, MetricsQuery(), T0 + timedelta(hours=1),
                           describe, list_named, metric_data)
    west, east = answer["regions"]["eu-west-1"], answer["regions"]["us-east-1"]
    assert west["status"] == "InProgress" and "Throttling" in west["error"]
    assert "loss" not in west
    assert east["status"] == "Unknown" and "AccessDeniedException" in east["error"]
