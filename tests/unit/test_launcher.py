"""A request's launcher: mpirun unless it asks for torchrun, and the node's own word for it in
the job's environment (TRAINGRID_LAUNCHER)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from traingrid.errors import RequestInvalid
from traingrid.training.plan import DatasetSize, plan_run
from traingrid.training.run_request import TrainingRunRequest
from traingrid.validation import parse
from traingrid_node import config as node_config

DATASET = "s3://bkt/imagenet/"


def environment(**fields: object) -> dict[str, str]:
    request = parse(TrainingRunRequest, {"dataset": DATASET, **fields})
    plan = plan_run(request, run="r", execution_arn="arn:aws:states:::execution:x:r",
                    dataset=DatasetSize(1, 1), now=datetime(2026, 11, 25, tzinfo=UTC))
    return plan["job"]["environment"]


def test_mpirun_by_default_and_torchrun_when_asked() -> None:
    assert environment()["TRAINGRID_LAUNCHER"] == "mpirun"
    assert environment(launcher="torchrun")["TRAINGRID_LAUNCHER"] == "torchrun"
    assert environment(launcher="mpirun", nodes=8, min_nodes=2)["TRAINGRID_LAUNCHER"] == "mpirun"


def test_on_ecs_a_run_that_may_shrink_is_elastic_by_default() -> None:
    """mpirun cannot go on without a lost node; elastic torchrun can, in the same job."""
    elastic = environment(nodes=8, min_nodes=6)
    assert (elastic["TRAINGRID_LAUNCHER"], elastic["TRAINGRID_MIN_NODES"]) == ("torchrun", "6")
    assert environment(nodes=8, min_nodes=8)["TRAINGRID_LAUNCHER"] == "mpirun"
    # Options for mpirun's line: mpirun it is.
    assert environment(nodes=8, min_nodes=6,
                       extra_mpi_params="-x NCCL_DEBUG=INFO")[
        "TRAINGRID_LAUNCHER"] == "mpirun"
    elastic = environment(launcher="torchrun", nodes=8, min_nodes=2)
    assert elastic["TRAINGRID_LAUNCHER"] == "torchrun"
    assert elastic["TRAINGRID_MIN_NODES"] == "2"


def test_the_request_offers_exactly_the_launchers_the_node_knows() -> None:
    declared = TrainingRunRequest.model_json_schema()["properties"]["launcher"]
    # Unset (null) is the backend's default, which is one of them (training.job_shape).
    (choices,) = [c["enum"] for c in declared["anyOf"] if "enum" in c]
    assert tuple(choices) == node_config.LAUNCHERS
    for launcher in choices:
        launch = node_config.parse_config(  # the node reads what the plan writes
            {**environment(launcher=launcher), "AWS_BATCH_JOB_NODE_INDEX": "0",
             "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0", "AWS_BATCH_JOB_NUM_NODES": "20"},
            ["python3", "-m", "traingrid_trainer"])
        assert launch.launcher == launcher


def test_another_launcher_is_refused_with_the_choices() -> None:
    with pytest.raises(RequestInvalid) as refused:
        parse(TrainingRunRequest, {"dataset": DATASET, "launcher": "srun"})
    [problem] = refused.value.problems
    assert problem["pointer"] == "/launcher"
    assert "mpirun" in problem["message"] and "torchrun" in problem["message"]
