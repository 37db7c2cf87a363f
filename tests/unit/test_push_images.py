"""make push-images: the SageMaker image is built once and pushed to every region named, with
Docker and the AWS CLI as it calls them (recorded by stand-ins on PATH)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORDER = '#!/bin/sh\necho "$(basename "$0") $*" >> "$CALLS"\n'


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


def test_the_image_is_built_once_and_pushed_to_each_region(tmp_path: Path) -> None:
    result, calls = push(tmp_path, REGIONS="us-east-1 eu-west-1", ACCOUNT="123456789012")

    assert result.returncode == 0, result.stderr
    builds = [c for c in calls if c.startswith("docker build")]
    assert builds == [
        f"docker build --tag traingrid-mnp:latest {ROOT}/containers/mnp",
        "docker build --tag traingrid-horovod:latest --build-arg NODE_IMAGE=traingrid-mnp:latest "
        f"{ROOT}/containers/sagemaker"]
    pushes = [c for c in calls if c.startswith("docker push")]
    assert pushes == [f"docker push 123456789012.dkr.ecr.{r}.amazonaws.com/traingrid-horovod:latest"
                      for r in ("us-east-1", "eu-west-1")]
    assert "aws ecr get-login-password --region eu-west-1" in calls
    assert "[2/2] 123456789012.dkr.ecr.eu-west-1.amazonaws.com" in result.stdout


def test_without_regions_nothing_is_built_and_it_says_what_to_give(tmp_path: Path) -> None:
    result, calls = push(tmp_path)

    assert result.returncode != 0 and calls == []
    assert 'REGIONS="us-east-1 eu-west-1"' in result.stderr
