"""The TrainingRun request: defaults from the seed, and every problem reported at once."""

from __future__ import annotations

import pytest

from traingrid.errors import RequestInvalid
from traingrid.training.run_request import DEFAULT_EXTRA_MPI_PARAMS, TrainingRunRequest
from traingrid.training.trigger import request_from_manifest
from traingrid.validation import parse


def test_defaults_are_the_reference_workload():
    request = parse(TrainingRunRequest, {"dataset": "s3://data-bucket/imagenet/resized"})
    assert (request.nodes, request.instance_type) == (20, "p4d.24xlarge")
    assert (request.batch_size, request.epochs, request.warmup_epochs) == (256, 90, None)
    assert request.lr_decay_mode == "poly"
    assert request.extra_mpi_params == DEFAULT_EXTRA_MPI_PARAMS
    assert "HOROVOD" not in request.extra_mpi_params  # nothing in the trainer reads one
    # ...but a request may still set one, for a command of its own that runs Horovod.
    horovod = "-x HOROVOD_FUSION_THRESHOLD=16777216"
    assert parse(TrainingRunRequest, {"dataset": "s3://data-bucket/imagenet/",
                                      "extra_mpi_params": horovod}).extra_mpi_params == horovod
    assert request.dataset == "s3://data-bucket/imagenet/resized/"
    assert (request.bucket, request.prefix) == ("data-bucket", "imagenet/resized/")


def test_every_problem_is_listed_with_its_pointer(load_event):
    with pytest.raises(RequestInvalid) as raised:
        request_from_manifest(load_event("manifest-invalid.json"), "bucket-a", "x/manifest.json")
    pointers = {p["pointer"] for p in raised.value.problems}
    assert pointers == {
        "/nodes", "/instance_type", "/extra_mpi_params", "/fsx/deployment_type",
        "/fsx/storage_capacity_gib", "/colour",
    }
    assert "manifest s3://bucket-a/x/manifest.json" in raised.value.message
    assert str(len(pointers)) in raised.value.message


def test_cross_field_rule_is_reported_when_fields_are_valid():
    with pytest.raises(RequestInvalid) as raised:
        parse(TrainingRunRequest, {"dataset": "s3://bkt/d/", "epochs": 5, "warmup_epochs": 5})
    assert raised.value.problems == [
        {"pointer": "", "message": "warmup_epochs (5) must be less than epochs (5)"}
    ]


@pytest.mark.parametrize("dataset", ["http://bkt/d", "s3://", "s3://A_B/x", "bucket/prefix"])
def test_dataset_must_be_an_s3_prefix(dataset):
    with pytest.raises(RequestInvalid) as raised:
        parse(TrainingRunRequest, {"dataset": dataset})
    assert raised.value.problems[0]["pointer"] == "/dataset"
    assert "S3 URI" in raised.value.problems[0]["message"]


@pytest.mark.parametrize("name", ["-lead", "a" * 81, "has space", "dots.not.allowed"])
def test_run_names_must_be_valid_everywhere_they_go(name):
    with pytest.raises(RequestInvalid):
        parse(TrainingRunRequest, {"dataset": "s3://bkt/d/", "name": name})


def test_not_an_object_is_one_clear_problem():
    with pytest.raises(RequestInvalid) as raised:
        parse(TrainingRunRequest, ["dataset"])
    assert raised.value.problems == [{"pointer": "", "message": "expected a JSON object, got list"}]


def test_manifest_dataset_defaults_to_its_prefix(load_event):
    request = request_from_manifest(load_event("manifest-valid.json"), "bkt", "a/b/manifest.json")
    assert request.dataset == "s3://bkt/a/b/"
    assert (request.nodes, request.instance_type, request.timeouts.runnable_minutes) == (
        4, "p4d.24xlarge", 45)


def test_manifest_may_name_another_prefix():
    request = request_from_manifest({"dataset": "s3://bkt/other/"}, "bkt", "a/manifest.json")
    assert request.dataset == "s3://bkt/other/"


def test_a_manifest_at_the_buckets_root_asks_for_no_dataset():
    """Its prefix is the bucket's root: every object of the bucket, the runs' archives too."""
    with pytest.raises(RequestInvalid) as raised:
        request_from_manifest({"nodes": 2}, "data-bucket", "manifest.json")
    assert raised.value.problems == [{"pointer": "/dataset", "message": (
        "s3://data-bucket/ is the bucket's root, not a dataset: name the prefix that holds the "
        "data, like s3://my-bucket/imagenet/")}]
