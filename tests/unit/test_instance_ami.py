"""p3 and g3 types on a stack: Batch's ECS_AL2023_NVIDIA AMI "doesn't support p3 and g3 instance
types" (AWS Batch API Reference, Ec2Configuration.imageType), so the plan and the API refuse
them, saying why, unless the stack names an AMI of its own (ImageIdOverride) or trains on EKS."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from traingrid.errors import RequestInvalid
from traingrid.runs.submit import training_submission
from traingrid.settings import ApiSettings, Settings
from traingrid.training import plan_step
from traingrid.training.plan import DatasetSize
from traingrid.training.run_request import TrainingRunRequest, require_runnable_here
from traingrid.vocabulary.catalog import DEFAULT_INSTANCE_TYPE, INSTANCE_TYPES, needs_own_ami
from traingrid_local.emulator.deploy import stand_in_environment
from traingrid_local.templates import load_template

DATASET = "s3://data/imagenet/"
NOW = datetime(2026, 11, 25, tzinfo=UTC)


def test_p3_and_g3_types_and_families_need_an_ami_of_their_own() -> None:
    assert [name for name in INSTANCE_TYPES if needs_own_ami(name)] == [
        "p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "p3dn.24xlarge"]
    assert needs_own_ami("g3s.xlarge") and needs_own_ami("g3") and needs_own_ami("p3")
    assert not any(map(needs_own_ami, ("p4d.24xlarge", "p5.48xlarge", "g5.12xlarge", "g4dn")))
    assert not needs_own_ami(DEFAULT_INSTANCE_TYPE)


def test_the_defaults_launch_on_batchs_ami() -> None:
    template = load_template()
    defaults = template["Parameters"]["TrainingInstanceTypes"]["Default"].split(",")
    assert defaults == ["p4d.24xlarge", "p5.48xlarge"]
    assert not any(map(needs_own_ami, defaults))
    assert TrainingRunRequest(dataset=DATASET).instance_type == DEFAULT_INSTANCE_TYPE
    assert DEFAULT_INSTANCE_TYPE in defaults
    reference = (template["Resources"]["TrainingJobDefinition"]["Properties"]["NodeProperties"]
                 ["NodeRangeProperties"][0]["Container"]["InstanceType"])
    assert reference == DEFAULT_INSTANCE_TYPE


def test_a_p3_run_is_refused_with_every_other_problem_at_once() -> None:
    request = TrainingRunRequest(dataset="s3://elsewhere/x/", instance_type="p3.16xlarge",
                                 batch_size=512)
    with pytest.raises(RequestInvalid) as refused:
        require_runnable_here(request, "data", ["p4d.24xlarge", "p5.48xlarge"], 12288,
                              launches_p3_and_g3=False)
    messages = [(p["pointer"], p["message"]) for p in refused.value.problems]
    assert [pointer for pointer, _ in messages] == [
        "/instance_type", "/instance_type", "/batch_size", "/dataset"]
    ami = messages[1][1]
    assert ("AWS Batch starts its GPU nodes on the ECS_AL2023_NVIDIA AMI, which does not "
            "support p3 and g3 instance types") in ami
    assert "ImageIdOverride=<an AMI that supports p3.16xlarge>" in ami
    assert "p4d.24xlarge" in ami  # what to choose instead


def test_a_stack_with_its_own_ami_or_on_eks_runs_p3() -> None:
    request = TrainingRunRequest(dataset=DATASET, instance_type="p3.16xlarge")
    require_runnable_here(request, "data", ["p3.16xlarge"], 12288, launches_p3_and_g3=True)
    base = {"DATA_BUCKET": "data"}
    assert not Settings.from_env(base).launches_p3_and_g3  # not told: Batch's own AMI
    assert not Settings.from_env(base | {"TRAINING_IMAGE_ID_OVERRIDDEN": "false"}
                                 ).launches_p3_and_g3
    assert Settings.from_env(base | {"TRAINING_IMAGE_ID_OVERRIDDEN": "true"}).launches_p3_and_g3
    # Batch's EKS_AL2023_NVIDIA AMI carries no such limit.
    assert Settings.from_env(base | {"TRAINING_BACKEND": "eks"}).launches_p3_and_g3


def test_the_plan_step_refuses_p3_on_a_stack_without_an_ami_of_its_own(monkeypatch) -> None:
    monkeypatch.setattr(plan_step, "size_part",
                        lambda bucket, prefix, *_: (None, DatasetSize(objects=10, bytes=10**9)))
    event = {"run": "r", "execution_arn": "arn",
             "request": {"dataset": DATASET, "instance_type": "p3.16xlarge"}}
    with pytest.raises(RequestInvalid) as refused:
        plan_step.plan(event, Settings(data_bucket="data"))
    assert "ECS_AL2023_NVIDIA" in refused.value.problems[0]["message"]
    with pytest.raises(RequestInvalid):
        plan_step.plan_request(event["request"], Settings(data_bucket="data"))
    overridden = Settings(data_bucket="data", training_image_id_overridden=True)
    assert plan_step.plan(event, overridden)["job"]["instance_type"] == "p3.16xlarge"


def test_the_api_reads_the_fact_from_the_stacks_environment() -> None:
    """As the template sets it: "false" unless ImageIdOverride is given."""
    environment = stand_in_environment() | {"DATA_BUCKET": "data"}
    assert environment["TRAINING_IMAGE_ID_OVERRIDDEN"] == "false"
    body = {"dataset": DATASET, "instance_type": "p3.16xlarge"}
    with pytest.raises(RequestInvalid) as refused:
        training_submission(body, ApiSettings.from_env(environment), NOW)
    assert [p["pointer"] for p in refused.value.problems] == ["/instance_type", "/instance_type"]
    own_ami = ApiSettings.from_env(environment | {
        "TRAINING_IMAGE_ID_OVERRIDDEN": "true",
        "TRAINING_INSTANCE_TYPES": "p3.16xlarge,p4d.24xlarge"})
    assert training_submission(body, own_ami, NOW).payload["request"]["instance_type"] == (
        "p3.16xlarge")


def test_the_template_passes_its_ami_to_the_compute_environment_and_the_functions() -> None:
    template = load_template()
    parameter = template["Parameters"]["ImageIdOverride"]
    assert parameter["Default"] == ""
    assert template["Conditions"]["OverridesImageId"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "ImageIdOverride"}, ""]}]}
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert variables["TRAINING_IMAGE_ID_OVERRIDDEN"] == {
        "Fn::If": ["OverridesImageId", "true", "false"]}
    # Both compute environments (with EFA types and without) launch the same AMI.
    for name in ("TrainingComputeEnvironment", "TrainingComputeEnvironmentWithoutEfa"):
        resources = template["Resources"][name]["Properties"]["ComputeResources"]
        eks, ecs = resources["Ec2Configuration"]["Fn::If"][1:]
        assert [{k: v for k, v in eks[0].items() if k != "ImageKubernetesVersion"}] == [
            {"ImageType": "EKS_AL2023_NVIDIA"}]
        assert ecs == {"Fn::If": ["OverridesImageId",
                                  [{"ImageType": {"Ref": "ImageIdOverrideType"},
                                    "ImageIdOverride": {"Ref": "ImageIdOverride"}}],
                                  {"Ref": "AWS::NoValue"}]}
    assert set(template["Parameters"]["ImageIdOverrideType"]["AllowedValues"]) == {
        "ECS_AL2023_NVIDIA", "ECS_AL2_NVIDIA"}
    rule = template["Rules"]["ImageIdOverrideIsForEcs"]
    assert rule["Assertions"][0]["Assert"] == {"Fn::Equals": [{"Ref": "EksClusterName"}, ""]}
