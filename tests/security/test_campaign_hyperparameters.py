"""A fan-out's hyperparameters reach SageMaker's CreateTrainingJob as they are: a request
naming ``sagemaker_submit_directory`` would make SageMaker's toolkit fetch and run code from any
tarball the training role can read, and ``sagemaker_program`` would pick the script. So only the
trainer's own flags are taken, at the request's edge (the API's 400, a RequestInvalid for an
execution started another way), every problem listed at once; and only values the trainer's
parser takes (it exits 2 on any other, in every region), held to the parser itself here."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from traingrid.campaigns.database_steps import _fanout_input
from traingrid.campaigns.fanout_request import TRAINER_HYPERPARAMETERS, FanoutRequest
from traingrid.campaigns.sagemaker_job import DEFAULT_HYPERPARAMETERS, create_request
from traingrid.campaigns.trainer_flags import (
    MAX_NUMBER,
    TRAINER_FLAGS,
    TRAINER_OPTIONS_NOT_HYPERPARAMETERS,
)
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


def sent(hyperparameters: dict[str, Any]) -> dict[str, str]:
    """The HyperParameters a region's job is created with, for a request's."""
    job = {"instance_type": "ml.p3.16xlarge", "instance_count": 2, "bytes": 10**9,
           "objects": 10, "hyperparameters": hyperparameters}
    return create_request(job, name="j", region="us-east-1", s3_input="s3://b/p/",
                          output_path="s3://b/o/", role_arn="arn:role", image="img",
                          tags={})["HyperParameters"]


def test_the_trainers_flags_are_taken_and_reach_the_job():
    request = parse(FanoutRequest, {"hyperparameters": {"lr": 0.2, "num_epochs": 30.0}})
    hyperparameters = sent(request.hyperparameters)
    # A number without a fraction is an integer (JSON Schema's), sent as the trainer reads one.
    assert (hyperparameters["lr"], hyperparameters["num_epochs"]) == ("0.2", "30")
    assert hyperparameters["sagemaker_program"] == "traingrid_train.py"


def test_values_the_trainer_refuses_are_refused_each_at_its_place():
    problems = problems_of({
        "hyperparameters": {"num_epochs": "abc", "batch_size": -5, "lr_decay_mode": "zigzag",
                            "lr": "0.1", "colour": 1},
        "regions": {"eu-west-1": {"hyperparameters": {
            "warmup_epochs": 2.5, "lars_lr": 0, "optimizer": True, "image_size": 2**53 + 1}}}})
    assert problems == {
        "/hyperparameters/num_epochs": "num_epochs must be an integer of at least 1 (at most "
                                       "2^53) (the trainer's --num_epochs), not \"abc\"",
        "/hyperparameters/batch_size": "batch_size must be an integer of at least 1 (at most "
                                       "2^53) (the trainer's --batch_size), not -5",
        "/hyperparameters/lr_decay_mode": "lr_decay_mode must be one of poly, cosine, step, "
                                          "linear (the trainer's --lr_decay_mode), not "
                                          "\"zigzag\"",
        "/hyperparameters/lr": "lr must be a number (from -2^53 to 2^53) (the trainer's --lr), "
                               "not \"0.1\"",
        "/hyperparameters/colour": "the trainer has no hyperparameter colour; it takes "
                                   + ", ".join(TRAINER_HYPERPARAMETERS),
        "/regions/eu-west-1/hyperparameters/warmup_epochs": (
            "warmup_epochs must be an integer of at least 0 (at most 2^53) or auto (the "
            "trainer's --warmup_epochs), not 2.5"),
        "/regions/eu-west-1/hyperparameters/lars_lr": (
            "lars_lr must be a number more than 0 (at most 2^53) (the trainer's --lars_lr), "
            "not 0"),
        "/regions/eu-west-1/hyperparameters/optimizer": (
            "optimizer must be one of auto, sgd, lars (the trainer's --optimizer), not true"),
        "/regions/eu-west-1/hyperparameters/image_size": (
            "image_size must be an integer of at least 1 (at most 2^53) (the trainer's "
            "--image_size), not 9007199254740993"),
    }


# JSON values of every kind, the choices' words among them.
SAMPLES = [0, 1, 3, -5, 30.0, 2.5, -0.1, 1e-4, MAX_NUMBER, MAX_NUMBER + 1, 1e300, True, None,
           "abc", "zigzag", "auto", "", " 3", "3", "0.1", "nan", "inf",
           *{word for flag in TRAINER_FLAGS.values() for word in flag.words}]


def trainer_takes(parser: Any, name: str, text: str) -> bool:
    """Whether the trainer's own parser takes ``--name text`` (argparse exits 2 if not)."""
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            parser.parse_args([f"--{name}", text])
        except SystemExit:
            return False
    return True


def test_the_table_is_the_trainers_parser(monkeypatch):
    """One table, held to the trainer's own parser: every option that takes a value is a flag
    or named as not one (with why); a choice's words are the parser's choices; every value the
    edge takes reaches the trainer as text its parser takes, and every value it refuses the
    parser refuses too, but where the edge is narrower on purpose: a number only as a JSON
    number (not "3", " 3" or "nan" as text) and at most 2^53 from 0."""
    monkeypatch.syspath_prepend(str(MNP))  # the node image's packages
    from traingrid_trainer.config import parser

    trainer = parser({})
    options = {action.dest: action for action in trainer._actions if action.dest != "help"}
    assert set(TRAINER_FLAGS) | set(TRAINER_OPTIONS_NOT_HYPERPARAMETERS) == set(options)
    assert not set(TRAINER_FLAGS) & set(TRAINER_OPTIONS_NOT_HYPERPARAMETERS)
    assert set(DEFAULT_HYPERPARAMETERS) <= set(TRAINER_FLAGS)
    for name, flag in TRAINER_FLAGS.items():
        # SageMaker passes each as "--name value": every flag takes a value.
        assert options[name].nargs != 0, name
        assert tuple(options[name].choices or ()) == (
            flag.words if flag.kind == "choice" else ()), name
        for value in SAMPLES:
            try:
                request = parse(FanoutRequest, {"hyperparameters": {name: value}})
            except RequestInvalid:
                narrower = flag.kind != "choice" and (isinstance(value, str) or (
                    isinstance(value, int | float) and abs(value) > MAX_NUMBER))
                assert narrower or not trainer_takes(trainer, name, str(value)), (name, value)
            else:
                text = sent(request.hyperparameters)[name]
                assert trainer_takes(trainer, name, text), (name, value, text)
