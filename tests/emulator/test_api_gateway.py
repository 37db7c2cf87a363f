"""The API Gateway resources SAM generates stay out of the emulated stack, with what needs
them; everything behind the API is created as it ships."""

from __future__ import annotations

import json

import pytest

from traingrid_local.emulator.api_gateway import references, without_api_gateway
from traingrid_local.emulator.deploy import package, translate
from traingrid_local.templates import load_template

API_PERMISSIONS = {f"ApiFunction{event}PermissionStage" for event in (
    "SubmitRun", "SubmitCommandRun", "PlanRun", "ListRuns", "DescribeRun", "RunLogs",
    "SubmitFanout", "ListCampaigns", "FollowPlan", "RunMetrics", "ListCosts", "CancelRun",
    "RerunRun")}


@pytest.fixture(scope="module")
def translated():
    return translate(package(load_template(), upload=lambda key, body: None))


def test_moto_cannot_create_the_rest_api_sam_generates(emulator):
    """Why the adaptation exists: moto ignores the OpenAPI body, so the deployment fails."""
    template = {"Resources": {
        "Api": {"Type": "AWS::ApiGateway::RestApi", "Properties": {"Name": "api", "Body": {
            "openapi": "3.0.1", "info": {"title": "api", "version": "1"},
            "paths": {"/runs": {"get": {"responses": {}, "x-amazon-apigateway-integration": {
                "type": "mock", "requestTemplates": {"application/json": "{}"}}}}}}}},
        "Deployment": {"Type": "AWS::ApiGateway::Deployment",
                       "Properties": {"RestApiId": {"Ref": "Api"}}},
    }}
    with pytest.raises(Exception, match="doesn.*t contain any methods"):
        emulator.client("cloudformation").create_stack(StackName="api",
                                                       TemplateBody=json.dumps(template))


def test_left_out_are_the_api_gateway_resources_their_permissions_and_outputs(translated):
    adapted, left_out = without_api_gateway(translated)
    api_resources = {k for k, r in translated["Resources"].items()
                     if r["Type"].startswith("AWS::ApiGateway::")}
    assert {"Api", "ApiStage", "ApiGatewayAccount"} <= api_resources
    # RunCommandsPolicy grants execute-api:Invoke on the command route: it names the API.
    assert set(left_out) == api_resources | API_PERMISSIONS | {
        "RunCommandsPolicy", "Outputs.RunCommandsPolicyArn",
        "Outputs.ApiUrl", "Outputs.ApiConsoleUrl"}
    kept = adapted["Resources"]
    assert {"ApiFunction", "ApiFunctionRole", "IdempotencyTable", "ApiGatewayCloudWatchRole",
            "StartRunFunctionManifestUploadedPermission"} <= set(kept)
    assert not any(references(resource) & set(left_out) for resource in kept.values())
    assert "TrainingRunConsoleUrl" in adapted["Outputs"]
    assert "Api" in translated["Resources"]  # the input is left as it was


def test_waiting_for_a_left_out_resource_is_not_needing_it():
    template = {"Resources": {
        "Api": {"Type": "AWS::ApiGateway::RestApi", "Properties": {}},
        "Waits": {"Type": "AWS::SNS::Topic", "DependsOn": ["Api", "Other"], "Properties": {}},
        "Other": {"Type": "AWS::SNS::Topic", "DependsOn": "Api", "Properties": {}},
    }}
    adapted, left_out = without_api_gateway(template)
    assert left_out == ["Api"]
    assert adapted["Resources"]["Waits"]["DependsOn"] == ["Other"]
    assert "DependsOn" not in adapted["Resources"]["Other"]


def test_references_of_every_intrinsic_form():
    fragment = {
        "A": {"Ref": "One"},
        "B": {"Fn::GetAtt": ["Two", "Arn"]},
        "C": {"Fn::GetAtt": "Three.Arn"},
        "D": {"Fn::Sub": "arn:${AWS::Partition}:x:${Four}:${Five.Name}"},
        "E": {"Fn::Sub": ["${Local}-${Six}", {"Local": {"Ref": "Seven"}}]},
        "F": [{"Fn::If": ["Cond", {"Ref": "Eight"}, "literal"]}],
    }
    assert references(fragment) == {"One", "Two", "Three", "Four", "Five", "Six", "Seven",
                                    "Eight"}
