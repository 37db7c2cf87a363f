"""Campaign markers, SageMaker job names and requests, and a region branch's decisions."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from traingrid.campaigns import branch
from traingrid.campaigns.markers import parse_marker
from traingrid.campaigns.sagemaker_job import (
    CHECKPOINTS_AND_MODEL_GB,
    FILE_MODE_MAX_BYTES,
    GIB,
    MAX_VOLUME_GB,
    MIN_VOLUME_GB,
    create_request,
    data_input,
)
from traingrid.errors import RequestInvalid
from traingrid.naming import fanout_name, job_name, short_region
from traingrid.training.waits import Poll
from traingrid.vocabulary.campaign_fanout import RegionJobStatus

SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-2",
           "us-gov-west-1"]


def test_marker_names_campaign_and_region():
    marker = parse_marker("bkt-usw2", "campaigns/sf-2026/us-west-2/_READY", "us-west-2")
    assert (marker.campaign, marker.region) == ("sf-2026", "us-west-2")
    assert marker.s3_uri == "s3://bkt-usw2/campaigns/sf-2026/us-west-2/"


@pytest.mark.parametrize(("key", "region", "message"), [
    ("campaigns/sf/_READY", "us-west-2", "expected campaigns/<campaign>/<region>/_READY"),
    ("campaigns/SF!/us-west-2/_READY", "us-west-2", "lower-case"),
    ("campaigns/sf/moon-1/_READY", "us-west-2", "not an AWS region code"),
    ("campaigns/sf/us-east-1/_READY", "us-west-2", "its bucket is in us-west-2"),
])
def test_bad_markers_say_why(key, region, message):
    with pytest.raises(RequestInvalid, match=re.escape(message)):
        parse_marker("bkt", key, region)


@given(execution=st.text(min_size=1, max_size=200), region=st.sampled_from(REGIONS),
       attempt=st.integers(min_value=1, max_value=99))
def test_job_names_are_valid_for_sagemaker(execution, region, attempt):
    name = job_name(execution, region, attempt)
    assert len(name) <= 63
    assert SAGEMAKER_NAME.fullmatch(name), name
    assert name.endswith(f"{short_region(region)}-{attempt}")


def test_job_names_differ_by_region_attempt_and_long_execution():
    base = "av-drive-2026-11-20261121T1300"
    names = {job_name(base, r, a) for r in REGIONS for a in (1, 2)}
    assert len(names) == len(REGIONS) * 2
    long_a, long_b = "x" * 80 + "a", "x" * 80 + "b"
    assert job_name(long_a, "us-west-2", 1) != job_name(long_b, "us-west-2", 1)


def test_request_launches_ddp_through_mpi_with_only_what_nccl_reads():
    job = {"instance_type": "ml.p3.16xlarge", "instance_count": 10, "bytes": 10**6,
           "objects": 3, "hyperparameters": {"num_epochs": 30}}
    request = create_request(job, name="n", region="eu-central-1", s3_input="s3://in/",
                             output_path="s3://out/", role_arn="arn:role", image="img",
                             tags={"traingrid:run": "r"}, spot=True)
    hp = request["HyperParameters"]
    assert hp["sagemaker_mpi_enabled"] == "true"
    assert hp["sagemaker_mpi_num_of_processes_per_host"] == "8"
    options = hp["sagemaker_mpi_custom_mpi_options"]
    assert "-x NCCL_MIN_NRINGS=8 -x NCCL_LAUNCH_MODE=PARALLEL" in options
    assert "HOROVOD" not in options  # nothing in the image reads one
    assert (hp["num_epochs"], hp["batch_size"], hp["lr_decay_mode"]) == ("30", "256", "poly")
    assert request["ResourceConfig"]["InstanceCount"] == 10
    assert request["EnableManagedSpotTraining"] is True
    assert request["CheckpointConfig"]["S3Uri"].startswith("s3://out/checkpoints/")
    # SageMaker uploads the trainer's TensorBoard files under the job's own output path, from
    # its default LocalPath (/opt/ml/output/tensorboard, where the trainer writes).
    assert request["TensorBoardOutputConfig"] == {"S3OutputPath": "s3://out/tensorboard/n/"}
    assert all(isinstance(v, str) for v in hp.values())


@pytest.mark.parametrize(("size", "objects", "mode", "volume"), [
    (96 * 1024, 3, "File", MIN_VOLUME_GB),  # the demo's shards: the smallest volume
    (80 * 10**9, 800, "File", 120),  # ceil(74.5 GiB × 1.2 + 30)
    (FILE_MODE_MAX_BYTES, 1000, "File", 142),  # the threshold itself still copies
    (FILE_MODE_MAX_BYTES + 1, 1000, "FastFile", MIN_VOLUME_GB),
    (150 * 10**9, 1024, "FastFile", MIN_VOLUME_GB),  # ImageNet-sized: no longer squeezed
    (5 * 10**12, 40_000, "FastFile", MIN_VOLUME_GB),  # a driving campaign: streamed
])
def test_input_mode_and_volume_follow_the_data(size, objects, mode, volume):
    chosen = data_input(size, objects)
    assert (chosen["input_mode"], chosen["volume_size_gb"]) == (mode, volume)
    assert chosen["input_reason"].startswith(f"{mode}: ")
    assert f"{volume} GB volume" in chosen["input_reason"]


@given(size=st.integers(min_value=0, max_value=5 * 1024**4),
       objects=st.integers(min_value=1, max_value=10**7))
def test_a_file_mode_volume_holds_the_data_checkpoints_and_model(size, objects):
    chosen = data_input(size, objects)
    assert MIN_VOLUME_GB <= chosen["volume_size_gb"] <= MAX_VOLUME_GB
    if chosen["input_mode"] == "File":
        assert chosen["volume_size_gb"] >= size / GIB + CHECKPOINTS_AND_MODEL_GB
    else:
        assert size > FILE_MODE_MAX_BYTES


def test_streaming_many_small_objects_says_they_read_slowly():
    assert "objects average 200.0 KB" in data_input(10**12, 5 * 10**6)["input_reason"]
    assert "average" not in data_input(10**12, 1000)["input_reason"]


def test_the_request_reads_the_data_as_the_plan_chose():
    job = {"instance_type": "ml.p4d.24xlarge", "instance_count": 4, "hyperparameters": {},
           "bytes": 5 * 10**12, "objects": 40_000, **data_input(5 * 10**12, 40_000)}
    request = create_request(job, name="n", region="us-west-2", s3_input="s3://in/",
                             output_path="s3://out/", role_arn="arn:role", image="img", tags={})
    assert request["AlgorithmSpecification"]["TrainingInputMode"] == "FastFile"
    assert request["InputDataConfig"][0]["InputMode"] == "FastFile"
    assert request["ResourceConfig"]["VolumeSizeInGB"] == MIN_VOLUME_GB
    # A plan made before the choice existed is given one from its data.
    del job["input_mode"], job["volume_size_gb"], job["input_reason"]
    job["bytes"] = 30 * 10**9
    request = create_request(job, name="n", region="us-west-2", s3_input="s3://in/",
                             output_path="s3://out/", role_arn="arn:role", image="img", tags={})
    assert request["InputDataConfig"][0]["InputMode"] == "File"
    assert request["ResourceConfig"]["VolumeSizeInGB"] == 64  # ceil(27.9 GiB × 1.2 + 30)


def test_capacity_failures_move_on_and_other_failures_do_not():
    capacity = branch.check({"TrainingJobStatus": "Failed", "FailureReason":
                             "CapacityError: Unable to provision requested ML compute"}, Poll())
    assert capacity["status"] == RegionJobStatus.CAPACITY_UNAVAILABLE
    algorithm = branch.check({"TrainingJobStatus": "Failed",
                              "FailureReason": "AlgorithmError: mpirun exited 1"}, Poll())
    assert algorithm["status"] == "Failed"
    running = branch.check({"TrainingJobStatus": "InProgress",
                            "SecondaryStatus": "Training"}, Poll())
    assert running["poll"]["wait_s"] == branch.SAGEMAKER_BACKOFF.first_s


def test_next_region_follows_the_plan_then_gives_up_naming_every_region():
    job = {"region": "us-west-2", "requested_region": "us-west-2", "attempt": 1,
           "fallbacks": ["us-east-1", "eu-west-1"], "instance_type": "ml.p3.16xlarge",
           "instance_count": 10}
    moved = branch.next_region(job, "CapacityError: none")
    assert (moved["region"], moved["status"], moved["attempt"]) == ("us-east-1", "Moving", 2)
    moved = branch.next_region(moved, "CapacityError: none")
    assert moved["region"] == "eu-west-1"
    done = branch.next_region(moved, "ResourceLimitExceeded: quota")
    assert done["status"] == "Failed"
    assert "tried us-west-2, us-east-1, eu-west-1" in done["reason"]


def test_no_capacity_first_halves_the_instances_in_the_region_then_moves_with_all_of_them():
    job = {"region": "us-west-2", "requested_region": "us-west-2", "attempt": 1,
           "fallbacks": ["us-east-1"], "instance_type": "ml.p3.16xlarge", "instance_count": 10,
           "requested_instance_count": 10, "min_instance_count": 3}
    steps = []
    while job.get("status") != "Failed":
        job = branch.next_region(job, "CapacityError: none")
        steps.append((job["region"], job["instance_count"]))
    assert steps == [("us-west-2", 5), ("us-west-2", 3), ("us-east-1", 10), ("us-east-1", 5),
                     ("us-east-1", 3), ("us-east-1", 3)]
    assert job["reason"].startswith(
        "No capacity for 10, 5, 3 × ml.p3.16xlarge in any acceptable region (tried us-west-2, "
        "us-east-1)")
    assert [t["instance_count"] for t in job["tried"]] == [10, 5, 3, 10, 5, 3]


def test_markers_of_one_window_share_one_fanout():
    first = datetime(2026, 11, 21, 13, 1, tzinfo=UTC)
    name = fanout_name("sf", first, 15)
    assert re.fullmatch(r"sf-20261121T1300-[0-9a-f]{12}", name)
    assert fanout_name("sf", first.replace(minute=14), 15) == name
    assert fanout_name("sf", first.replace(minute=15), 15).startswith("sf-20261121T1315-")


def test_scheduled_and_marker_fanouts_of_one_window_differ():
    moment = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
    assert fanout_name("sf", moment, 60, "schedule") != fanout_name("sf", moment, 60)
    assert fanout_name("sf", moment, 60, "schedule").startswith("sf-20261121T0200-")


def test_overrides_for_regions_without_a_job_and_a_minimum_above_the_count_are_refused():
    from traingrid.campaigns.database_steps import check_plan_options
    from traingrid.errors import RequestInvalid
    from traingrid.vocabulary.campaign_fanout import RegionJobPlan

    plan = RegionJobPlan(
        region="us-east-1", requested_region="us-east-1", s3_uri="s3://b/p/", objects=1,
        bytes=1, instance_type="ml.p3.16xlarge", instance_count=4, usd_per_hour=1.0,
        transfer_gb=0.0, estimated_usd=1.0, reason="r", fallbacks=(), copy_from=None)
    with pytest.raises(RequestInvalid) as raised:
        check_plan_options([plan], 8, {"us-east-1": {}, "ap-south-1": {"image_tag": "v2"}})
    assert raised.value.problems == [
        {"pointer": "/options/min_instance_count",
         "message": "must be at most instance_count (4), not 8"},
        {"pointer": "/options/regions/ap-south-1",
         "message": "no job of this fan-out reads data in ap-south-1 (it has data in us-east-1)"},
    ]


def test_large_objects_are_copied_in_at_most_10000_parts_of_512_mib_or_more():
    from traingrid.campaigns import staging

    gib = 1024**3
    assert not staging.needs_multipart(5 * gib) and staging.needs_multipart(5 * gib + 1)
    assert (staging.part_size(6 * 10**9), staging.part_count(6 * 10**9)) == (512 * 1024**2, 12)
    assert staging.part_range(6 * 10**9, 1) == f"bytes=0-{512 * 1024**2 - 1}"
    assert staging.part_range(6 * 10**9, 12) == f"bytes={11 * 512 * 1024**2}-{6 * 10**9 - 1}"
    five_tib = 5 * 1024**4
    assert staging.part_count(five_tib) <= 10_000 and staging.part_size(five_tib) <= 5 * gib
    with pytest.raises(ValueError, match="larger than S3 can hold"):
        staging.part_size(five_tib * 11)
