"""The SageMaker image starts as SageMaker starts it (``docker run <image> train``) through its
base's entrypoint, NGC's /opt/nvidia/nvidia_entrypoint.sh, which sets up CUDA forward
compatibility before it execs ``train``: read from the Dockerfiles as Docker reads them."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from traingrid.campaigns.sagemaker_job import create_request

ROOT = Path(__file__).resolve().parents[2]
NGC_ENTRYPOINT = "/opt/nvidia/nvidia_entrypoint.sh"


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments out."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def exec_form(arguments: str) -> list[str]:
    value = json.loads(arguments)
    assert isinstance(value, list), f"{arguments} is not Docker's exec form"
    return value


def last(found: list[tuple[str, str]], instruction: str) -> str:
    return [rest for word, rest in found if word == instruction][-1]


def test_sagemakers_train_starts_through_the_ngc_entrypoint() -> None:
    sagemaker = instructions(ROOT / "containers" / "sagemaker" / "Dockerfile")
    node = instructions(ROOT / "containers" / "mnp" / "Dockerfile")

    # The node image is NGC's PyTorch image, whose entrypoint the SageMaker image restores
    # (the node image replaced it with the node program).
    base = next(rest for word, rest in node if word == "ARG" and rest.startswith("BASE_IMAGE="))
    assert base.removeprefix("BASE_IMAGE=").startswith("nvcr.io/nvidia/pytorch:")
    entrypoint = exec_form(last(sagemaker, "ENTRYPOINT"))
    assert entrypoint == [NGC_ENTRYPOINT]
    assert exec_form(last(sagemaker, "CMD")) == ["train"]
    # docker run <image> train: the arguments replace CMD, the ENTRYPOINT stays.
    assert [*entrypoint, "train"] == [NGC_ENTRYPOINT, "train"]
    # The build fails on a base without it, rather than an image that skips it.
    runs = [shlex.split(rest) for word, rest in sagemaker if word == "RUN"]
    assert ["test", "-x", NGC_ENTRYPOINT] in runs


def test_batchs_nodes_start_the_node_program_through_the_ngc_entrypoint() -> None:
    """The node image (every Batch job) starts as Batch starts it (the job definition's command
    after the image's ENTRYPOINT), through NGC's entrypoint too, which execs the node program."""
    node = instructions(ROOT / "containers" / "mnp" / "Dockerfile")
    entrypoint = exec_form(last(node, "ENTRYPOINT"))
    assert entrypoint == [NGC_ENTRYPOINT, "python3", "-m", "traingrid_node"]
    runs = [shlex.split(rest) for word, rest in node if word == "RUN"]
    assert ["test", "-x", NGC_ENTRYPOINT] in runs


def test_the_training_job_keeps_the_images_entrypoint() -> None:
    """CreateTrainingJob's AlgorithmSpecification.ContainerEntrypoint would replace it."""
    request = create_request(
        {"instance_type": "ml.p4d.24xlarge", "instance_count": 2,  # type: ignore[typeddict-item]
         "hyperparameters": {}, "bytes": 10**6, "objects": 3},
        name="job", region="eu-west-1", s3_input="s3://campaign/c/",
        output_path="s3://artifacts/c/", role_arn="arn:aws:iam::1:role/r",
        image="1.dkr.ecr.eu-west-1.amazonaws.com/traingrid-sagemaker:0.1.0", tags={})
    algorithm = request["AlgorithmSpecification"]
    assert "ContainerEntrypoint" not in algorithm
    assert "ContainerArguments" not in algorithm
