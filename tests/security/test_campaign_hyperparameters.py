"""A fan-out's hyperparameters reach SageMaker's CreateTrainingJob as they are: a request
naming ``sagemaker_submit_directory`` would make SageMaker's toolkit fetch and run code from any
tarball the training role can read, and ``sagemaker_program`` would pick the script. So only the
trainer's own flags are taken, at the request's edge (the API's 400, a RequestInvalid for an
execution started another way), every problem listed at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from traingrid.campaigns.database_steps import _fanout_input
from traingrid.campaigns.fanout_request import (
    TRAINER_HYPERPARAMETERS,
    TRAINER_OPTIONS_NOT_HYPERPARAMETERS,
    FanoutRequest,
)
from traingrid.campaigns.sagemaker_job import DEFAULT_HYPERPARAMETERS, create_request
from traingrid.errors import RequestInvalid
from traingrid.validation import parse

MNP = Path(__file__).resolve().parents[2] / "containers" / "mnp"
FETCH_CODE = {"sagemaker_submit_directory": "s3://someone/else/code.tar.gz"}


def problems_of(body: dict) -> dict[str, str]:
    with pytest.raises(RequestInvalid) as refused:
        parse(FanoutRequest, body)
    return {p["pointer"]: p["message"] for p in refused.value.problems}


def test_sagemakers_own_names_are_refused_everywhere_with_every_other_problem():
    problems = problems_of({
        "hyperparameters": FETCH_CODE | {"lr": 0.2, "colour": "red"}, "placement": "moon",
        "regions": {"eu-west-1": {"hyperparameters": {"sagemaker_program": "evil.py",
                                                      "num_epochs": 3}}}})
    assert set(problems) == {
        "/placement", "/hyperparameters/sagemaker_submit_directory", "/hyperparameters/colour",
        "/regions/eu-west-1/hyperparameters/sagemaker_program"}
    assert "SageMaker's own setting" in problems["/hyperparameters/sagemaker_submit_directory"]
    # A name the trainer does not know is refused, naming those it does.
    assert problems["/hyperparameters/colour"].endswith(", ".join(TRAINER_HYPERPARAMETERS))


def test_a_fanout_started_another_way_is_refused_too():
    with pytest.raises(RequestInvalid) as refused:
        _fanout_input({"campaign": "av-drive", "input": {"options": {
            "hyperparameters": FETCH_CODE, "regions": {"us-west-2": {
                "hyperparameters": {"sagemaker_mpi_custom_mpi_options": "-x LD_PRELOAD=x"}}}}}})
    assert [p["pointer"] for p in refused.value.problems] == [
        "/options/hyperparameters/sagemaker_submit_directory",
        "/options/regions/us-west-2/hyperparameters/sagemaker_mpi_custom_mpi_options"]
    assert refused.value.message.startswith("Invalid fan-out input")


def test_the_trainers_flags_are_taken_and_reach_the_job():
    request = parse(FanoutRequest, {"hyperparameters": {"lr": 0.2, "num_epochs": 30}})
    job = {"instance_type": "ml.p3.16xlarge", "instance_count": 2, "bytes": 10**9,
           "objects": 10, "hyperparameters": request.hyperparameters}
    sent = create_request(job, name="j", region="us-east-1", s3_input="s3://b/p/",
                          output_path="s3://b/o/", role_arn="arn:role", image="img", tags={})
    assert (sent["HyperParameters"]["lr"], sent["HyperParameters"]["num_epochs"]) == ("0.2", "30")
    assert sent["HyperParameters"]["sagemaker_program"] == "traingrid_train.py"


def test_the_list_is_the_trainers_parser(monkeypatch):
    """One list, held to the trainer's own parser: every option that takes a value is either
    a hyperparameter or named as not one (with why); nothing else."""
    monkeypatch.syspath_prepend(str(MNP))  # the node image's packages
    from traingrid_trainer.config import parser

    options = {action.dest: action for action in parser({})._actions if action.dest != "help"}
    assert set(TRAINER_HYPERPARAMETERS) | set(TRAINER_OPTIONS_NOT_HYPERPARAMETERS) == set(options)
    assert not set(TRAINER_HYPERPARAMETERS) & set(TRAINER_OPTIONS_NOT_HYPERPARAMETERS)
    # SageMaker passes each as "--name value": every hyperparameter takes a value.
    assert all(options[name].nargs != 0 for name in TRAINER_HYPERPARAMETERS)
    assert set(DEFAULT_HYPERPARAMETERS) <= set(TRAINER_HYPERPARAMETERS)
