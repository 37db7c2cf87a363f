"""make push-images: the node image and the SageMaker image on it are built once with one
version tag; the node image goes to the main stack's repository in its region, the SageMaker
image to every campaign region named, with Docker and the AWS CLI as it calls them (recorded
by stand-ins on PATH)."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

from traingrid_local.emulator.deploy import REGIONAL_TEMPLATE, load_template

ROOT = Path(__file__).resolve().parents[2]
RECORDER = '#!/bin/sh\necho "$(basename "$0") $*" >> "$CALLS"\n'
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def push(tmp_path: Path, **variables: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("docker", "aws"):
        (bin_dir / tool).write_text(RECORDER)
        (bin_dir / tool).chmod(0o755)
    calls = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls)}
    result = subprocess.run(
        ["make", "--no-print-directory", "push-images",
         *(f"{k}={v}" for k, v in variables.items())],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    return result, calls.read_text().splitlines() if calls.exists() else []


def test_both_images_are_built_once_and_pushed_by_version(tmp_path: Path) -> None:
    result, calls = push(tmp_path, HOME_REGION="us-east-1", REGIONS="us-east-1 eu-west-1",
                         ACCOUNT="123456789012")

    assert result.returncode == 0, result.stderr
    builds = [c for c in calls if c.startswith("docker build")]
    assert builds == [
        f"docker build --tag traingrid-mnp:{VERSION} {ROOT}/containers/mnp",
        f"docker build --tag traingrid-sagemaker:{VERSION} "
        f"--build-arg NODE_IMAGE=traingrid-mnp:{VERSION} {ROOT}/containers/sagemaker"]
    pushes = [c for c in calls if c.startswith("docker push")]
    assert pushes == [
        f"docker push 123456789012.dkr.ecr.us-east-1.amazonaws.com/traingrid-mnp:{VERSION}",
        *(f"docker push 123456789012.dkr.ecr.{r}.amazonaws.com/traingrid-sagemaker:{VERSION}"
          for r in ("us-east-1", "eu-west-1"))]
    assert not any("latest" in c for c in calls)
    assert "aws ecr get-login-password --region eu-west-1" in calls
    assert "[2/2] 123456789012.dkr.ecr.eu-west-1.amazonaws.com" in result.stdout


def test_a_tag_given_is_the_tag_of_both_images(tmp_path: Path) -> None:
    result, calls = push(tmp_path, HOME_REGION="eu-west-1", TAG="2.0.1", ACCOUNT="123456789012")

    assert result.returncode == 0, result.stderr
    assert [c for c in calls if c.startswith("docker push")] == [
        "docker push 123456789012.dkr.ecr.eu-west-1.amazonaws.com/traingrid-mnp:2.0.1"]
    assert "--build-arg NODE_IMAGE=traingrid-mnp:2.0.1" in " ".join(calls)


def test_without_a_home_region_or_with_latest_nothing_is_built_and_it_says_why(
        tmp_path: Path) -> None:
    result, calls = push(tmp_path, TAG="latest")

    assert result.returncode != 0 and calls == []
    assert "HOME_REGION=us-east-1" in result.stderr
    assert "TAG may not be latest" in result.stderr


def test_the_stack_runs_the_version_make_pushes_from_its_own_private_repository() -> None:
    template = load_template()
    assert template["Parameters"]["NodeImageTag"]["Default"] == VERSION
    assert template["Parameters"]["TrainingImageRepository"]["Default"] == (
        f"traingrid-sagemaker:{VERSION}")
    repository = template["Resources"]["NodeImageRepository"]["Properties"]
    assert repository["RepositoryName"] == "traingrid-mnp"
    assert repository["ImageTagMutability"] == "IMMUTABLE"
    assert repository["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert repository["EncryptionConfiguration"]["EncryptionType"] in ("AES256", "KMS")
    assert "LifecyclePolicyText" in repository["LifecyclePolicy"]
    assert "RepositoryPolicyText" not in repository  # nothing public
    container = (template["Resources"]["TrainingJobDefinition"]["Properties"]["NodeProperties"]
                 ["NodeRangeProperties"][0]["Container"])
    account_image, override = container["Image"]["Fn::If"][1:]
    assert account_image == {"Fn::Sub": "${NodeImageRepository.RepositoryUri}:${NodeImageTag}"}
    assert override == {"Ref": "TrainingImageUri"}
    regional = load_template(REGIONAL_TEMPLATE)["Resources"]["TrainingImageRepository"]
    assert regional["Properties"]["ImageTagMutability"] == "IMMUTABLE"
    sagemaker = (ROOT / "containers/sagemaker/Dockerfile").read_text()
    assert re.search(rf"^ARG NODE_IMAGE=traingrid-mnp:{re.escape(VERSION)}$", sagemaker, re.M)
