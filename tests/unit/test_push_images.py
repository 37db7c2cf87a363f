"""make push-images: the node image and the SageMaker image on it are built once with one
version tag; the node image goes to the main stack's repository in its region, the SageMaker
image to every campaign region named, with Docker and the AWS CLI as it calls them (recorded
by stand-ins on PATH)."""

from __future__ import annotations

import json
import os
import re
import runpy
import subprocess
import tomllib
from pathlib import Path

from traingrid_local.templates import REGIONAL_TEMPLATE, load_template

ROOT = Path(__file__).resolve().parents[2]
# Stand-ins that record every call; docker answers `image inspect` with the local image's ID
# (LOCAL_ID) or repo digests (LOCAL_DIGESTS), aws answers BatchGetImage with what
# $REMOTE/<region>-<repository>.json holds (an image), or ECR's ImageNotFound failure.
DOCKER = """#!/bin/sh
echo "docker $*" >> "$CALLS"
case "$*" in
  "image inspect --format {{.Id}} "*) echo "$LOCAL_ID" ;;
  "image inspect --format "*RepoDigests*) echo "$LOCAL_DIGESTS" ;;
esac
"""
AWS = """#!/bin/sh
echo "aws $*" >> "$CALLS"
case "$*" in
  "ecr batch-get-image "*)
    region=$4; repository=$6
    if [ -f "$REMOTE/$region-$repository.json" ]; then cat "$REMOTE/$region-$repository.json"
    else echo '{"images": [], "failures": [{"failureCode": "ImageNotFound"}]}'; fi ;;
esac
"""
LOCAL_ID = "sha256:" + "1" * 64
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
DECISION = runpy.run_path(str(ROOT / "containers" / "push-decision.py"))


def held(tmp_path: Path, region: str, repository: str, config: str, digest: str) -> None:
    """The region's repository holds the version tag: an image of ``config``."""
    remote = tmp_path / "remote"
    remote.mkdir(exist_ok=True)
    manifest = {"schemaVersion": 2, "config": {"digest": config}, "layers": []}
    (remote / f"{region}-{repository}.json").write_text(json.dumps({"images": [{
        "imageId": {"imageDigest": digest, "imageTag": VERSION},
        "imageManifest": json.dumps(manifest)}], "failures": []}))


def push(tmp_path: Path, local_digests: str = "",
         **variables: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, text in (("docker", DOCKER), ("aws", AWS)):
        (bin_dir / tool).write_text(text)
        (bin_dir / tool).chmod(0o755)
    calls = tmp_path / "calls"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls),
           "LOCAL_ID": LOCAL_ID, "LOCAL_DIGESTS": local_digests,
           "REMOTE": str(tmp_path / "remote")}
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
    # For the x86_64 instances whatever this machine is, one manifest each (no index).
    assert builds == [
        f"docker build --platform linux/amd64 --provenance=false --tag traingrid-mnp:{VERSION} "
        f"{ROOT}/containers/mnp",
        f"docker build --platform linux/amd64 --provenance=false --tag "
        f"traingrid-sagemaker:{VERSION} --build-arg NODE_IMAGE=traingrid-mnp:{VERSION} "
        f"{ROOT}/containers/sagemaker"]
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


def test_a_rerun_skips_what_is_there_and_pushes_only_what_is_missing(tmp_path: Path) -> None:
    # The first run pushed the node image and us-east-1's; eu-west-1's push failed.
    held(tmp_path, "us-east-1", "traingrid-mnp", LOCAL_ID, "sha256:" + "a" * 64)
    held(tmp_path, "us-east-1", "traingrid-sagemaker", LOCAL_ID, "sha256:" + "b" * 64)
    result, calls = push(tmp_path, HOME_REGION="us-east-1", REGIONS="us-east-1 eu-west-1",
                         ACCOUNT="123456789012")

    assert result.returncode == 0, result.stderr
    assert [c for c in calls if c.startswith("docker push")] == [
        f"docker push 123456789012.dkr.ecr.eu-west-1.amazonaws.com/traingrid-sagemaker:{VERSION}"]
    assert (f"node image 123456789012.dkr.ecr.us-east-1.amazonaws.com/traingrid-mnp:{VERSION}: "
            "already there, skipped") in result.stdout
    assert "1 pushed, 2 already there" in result.stdout
    # ECR was asked for the version tag in each repository before anything was pushed.
    asked = [c for c in calls if c.startswith("aws ecr batch-get-image")]
    assert asked[0] == (f"aws ecr batch-get-image --region us-east-1 --repository-name "
                        f"traingrid-mnp --image-ids imageTag={VERSION} --output json")
    assert len(asked) == 3 and calls.index(asked[-1]) < calls.index(
        next(c for c in calls if c.startswith("docker push")))


def test_a_tag_holding_another_build_stops_everything_naming_each_place(tmp_path: Path) -> None:
    other = "sha256:" + "2" * 64
    held(tmp_path, "eu-west-1", "traingrid-sagemaker", other, "sha256:" + "c" * 64)
    result, calls = push(tmp_path, HOME_REGION="us-east-1", REGIONS="us-east-1 eu-west-1",
                         ACCOUNT="123456789012")

    assert result.returncode != 0
    assert not [c for c in calls if c.startswith("docker push")]
    assert (f"123456789012.dkr.ecr.eu-west-1.amazonaws.com/traingrid-sagemaker:{VERSION}: the "
            f"tag already holds another image (sha256:{'c' * 64}, config {other}; this build is "
            f"{LOCAL_ID}): tags are immutable, so build a new version") in result.stderr


def test_the_push_decision_reads_ecrs_answer_and_the_local_image() -> None:
    decide = DECISION["decide"]
    missing = {"images": [], "failures": [{"failureCode": "ImageNotFound"}]}
    assert decide(missing, LOCAL_ID, []) == ("push", "not in the repository yet (ImageNotFound)")
    manifest = json.dumps({"config": {"digest": "sha256:" + "9" * 64}})
    there = {"images": [{"imageId": {"imageDigest": "sha256:" + "d" * 64},
                         "imageManifest": manifest}]}
    # Not the same config, but this machine pushed that very manifest (a containerd store's
    # ID is its index's digest, not the config's).
    assert decide(there, LOCAL_ID, [f"r/traingrid-mnp@sha256:{'d' * 64}"])[0] == "skip"
    assert decide(there, LOCAL_ID, [])[0] == "conflict"


def test_lifecycle_rules_never_expire_a_tagged_image() -> None:
    """ECR: a rule with tagStatus untagged selects untagged images only; "any" evaluates
    every image, the tag a stack runs included (User Guide, "Lifecycle policy properties")."""
    repositories = [
        load_template()["Resources"]["NodeImageRepository"],
        load_template(REGIONAL_TEMPLATE)["Resources"]["TrainingImageRepository"]]
    for repository in repositories:
        policy = json.loads(repository["Properties"]["LifecyclePolicy"]["LifecyclePolicyText"])
        for rule in policy["rules"]:
            selection = rule["selection"]
            assert selection["tagStatus"] == "untagged", rule
            assert "tagPrefixList" not in selection and "tagPatternList" not in selection


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
