"""Planning: capacity rounding, GPUs, the job's environment, tags and limits."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from traingrid.errors import RequestInvalid
from traingrid.training.plan import GIB, DatasetSize, plan_run
from traingrid.training.run_request import TrainingRunRequest
from traingrid.validation import parse
from traingrid.vocabulary.catalog import DeploymentType, is_valid_capacity, round_up_capacity

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:TrainingRun:run-1"


def plan(dataset_gib: float = 140, **fields):
    request = parse(TrainingRunRequest, {"dataset": "s3://bkt/imagenet/", **fields})
    size = DatasetSize(objects=1024, bytes=int(dataset_gib * GIB))
    return plan_run(request, run="run-1", execution_arn=EXECUTION, dataset=size, now=NOW)


@pytest.mark.parametrize(("deployment", "needed", "expected"), [
    (DeploymentType.SCRATCH_2, 1, 1200),
    (DeploymentType.SCRATCH_2, 1200, 1200),
    (DeploymentType.SCRATCH_2, 1201, 2400),
    (DeploymentType.SCRATCH_2, 2401, 4800),
    (DeploymentType.SCRATCH_2, 4800, 4800),
    (DeploymentType.PERSISTENT_1, 5000, 7200),
    # The catalog still rounds SCRATCH_1 (3,600 GiB steps), which no request may ask for.
    ("SCRATCH_1", 2401, 3600),
    ("SCRATCH_1", 3601, 7200),
])
def test_capacity_rounds_up_to_a_valid_increment(deployment, needed, expected):
    assert round_up_capacity(deployment, needed) == expected
    assert is_valid_capacity(deployment, expected)


def test_reference_plan_has_160_gpus_and_the_seed_environment():
    result = plan()
    job = result["job"]
    assert (job["nodes"], job["instance_type"], job["gpus_per_node"]) == (20, "p4d.24xlarge", 8)
    assert job["mpi_gpus"] == 160
    env = job["environment"]
    assert env["MPI_GPUS"] == "160"
    assert env["BATCH_SIZE"] == "256"
    # The trainer's rule scales the warmup with the global batch (schedule.recipe).
    assert env["EPOCHS"] == "90" and env["WARMUP_EPOCHS"] == "auto"
    assert env["LR_DECAY_MODE"] == "poly"
    assert env["EXTRA_MPI_PARAMS"] == "-x NCCL_MIN_NRINGS=8 -x NCCL_LAUNCH_MODE=PARALLEL"
    assert env["OUTPUT_DIR"] == env["TRAINGRID_EXPORT_DIR"] == "/fsx/outputs"
    assert all(isinstance(v, str) for v in env.values())
    assert {"Type": "GPU", "Value": "8"} in job["resource_requirements"]


def test_gpus_follow_the_instance_type():
    job = plan(nodes=3, instance_type="g5.12xlarge")["job"]
    assert job["mpi_gpus"] == 12
    assert job["environment"]["MPI_GPUS"] == "12"


def test_file_system_is_sized_from_the_dataset_with_headroom():
    # A job that reads slowly: the dataset's bytes, not its reads, size the file system.
    slow = {"expected_images_per_s_per_gpu": 1}
    assert plan(dataset_gib=100, **slow)["file_system"]["storage_capacity_gib"] == 1200
    # 2000 GiB × 1.25 = 2500 GiB → the next SCRATCH_2 size is 4800
    assert plan(dataset_gib=2000, **slow)["file_system"]["storage_capacity_gib"] == 4800


def test_file_system_hydrates_from_the_dataset_and_exports_to_the_runs_own_prefix():
    fs = plan()["file_system"]
    lustre = fs["lustre_configuration"]
    assert lustre == {"DeploymentType": "SCRATCH_2", "ImportPath": "s3://bkt/imagenet/",
                      "ExportPath": "s3://bkt/runs/run-1/"}
    persistent = plan(fsx={"deployment_type": "PERSISTENT_1"})["file_system"]
    assert persistent["lustre_configuration"]["PerUnitStorageThroughput"] == 200


def test_file_system_is_created_at_lustre_2_15_not_fsxs_default_2_10():
    # FSx makes SCRATCH_2 and PERSISTENT_1 at 2.10 unless asked; the nodes' Amazon Linux 2023
    # and Ubuntu 24.04 clients cannot mount 2.10.
    assert plan()["file_system"]["file_system_type_version"] == "2.15"
    persistent = plan(fsx={"deployment_type": "PERSISTENT_1"})["file_system"]
    assert persistent["file_system_type_version"] == "2.15"


def test_scratch_1_is_refused_saying_why_and_what_to_use():
    with pytest.raises(RequestInvalid) as raised:
        plan(fsx={"deployment_type": "SCRATCH_1"}, nodes=0)
    problems = {p["pointer"]: p["message"] for p in raised.value.problems}
    # Every problem at once: the node count and the deployment type.
    assert "/nodes" in problems
    message = problems["/fsx/deployment_type"]
    assert "SCRATCH_1 is not offered" in message and "encrypt data in transit" in message
    assert "SCRATCH_2" in message and "PERSISTENT_1" in message


def test_tags_name_the_run_execution_and_expiry():
    result = plan()
    tags = {t["Key"]: t["Value"] for t in result["file_system"]["tags"]}
    assert tags["traingrid:run"] == "run-1"
    assert tags["traingrid:execution"] == EXECUTION
    # hydrate 60 min + 3 attempts × (runnable 30 min + training 72 h) + archive 120 min
    # + 1 h margin
    assert tags["traingrid:expires-at"] == "2026-11-30T17:30:00Z"


def test_requested_capacity_must_be_valid_and_large_enough():
    with pytest.raises(RequestInvalid) as raised:
        plan(dataset_gib=3000, fsx={"storage_capacity_gib": 3000})
    messages = [p["message"] for p in raised.value.problems]
    assert len(messages) == 2
    assert "not a valid SCRATCH_2 capacity" in messages[0] and "4800" in messages[0]
    assert "cannot hold the dataset" in messages[1]
    assert plan(dataset_gib=10, fsx={"storage_capacity_gib": 2400})["file_system"][
        "storage_capacity_gib"] == 2400


def test_archive_and_limits():
    result = plan(timeouts={"training_hours": 2})
    assert result["archive"] == {"bucket": "bkt", "prefix": "runs/run-1/",
                                 "outputs_prefix": "runs/run-1/outputs/",
                                 "file_system_path": "outputs"}
    assert result["limits"]["training_s"] == 7200
    assert result["job"]["attempt_duration_s"] == 7200 + 900


def test_cost_estimate():
    estimate = plan()["estimate"]
    # rounded to the cent
    assert estimate["compute_usd_per_hour"] == pytest.approx(20 * 32.7726, abs=0.01)
    assert estimate["max_usd"] > estimate["compute_usd_per_hour"] * 72


def test_the_plan_has_exactly_the_keys_its_type_declares():
    from typing import get_type_hints, is_typeddict

    from traingrid.training.job_shape import Backend
    from traingrid.vocabulary.training_run import RunPlan

    def keys_match(value, declared, path="plan", absent=None):
        absent = absent or {}
        assert set(value) == set(declared.__annotations__) - absent.get(path, set()), path
        for key, kind in get_type_hints(declared).items():
            if is_typeddict(kind):
                keys_match(value[key], kind, f"{path}.{key}", absent)

    # Only an EKS node has a pod (training.job_shape).
    keys_match(plan(), RunPlan, absent={"plan.job": {"pod"}})
    request = parse(TrainingRunRequest, {"dataset": "s3://bkt/imagenet/"})
    keys_match(plan_run(request, run="run-1", execution_arn=EXECUTION, now=NOW,
                        dataset=DatasetSize(objects=1024, bytes=140 * GIB),
                        backend=Backend.EKS), RunPlan)
