"""The emulated account's quotas and settings (emulator/account.py), as AWS's APIs answer."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from traingrid_local.emulator.account import ACCOUNT
from traingrid_local.emulator.session import Emulator


def test_quotas_are_a_new_accounts_until_set_per_region(emulator):
    east = emulator.client("service-quotas", "us-east-1")
    west = emulator.client("service-quotas", "us-west-2")

    def p_vcpus(client):
        return client.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]

    quota = p_vcpus(east)
    assert (quota["QuotaName"], quota["Value"]) == ("Running On-Demand P instances", 0)
    ACCOUNT.set_quota("ec2", "Running On-Demand P instances", 1920, ["us-west-2"])
    assert (p_vcpus(east)["Value"], p_vcpus(west)["Value"]) == (0, 1920)
    # AWS's default differs from what a new account has applied.
    default = east.get_aws_default_service_quota(ServiceCode="lambda", QuotaCode="L-B99A9384")
    assert default["Quota"]["Value"] == 1000
    applied = east.get_service_quota(ServiceCode="lambda", QuotaCode="L-B99A9384")
    assert applied["Quota"]["Value"] == 10
    with pytest.raises(ClientError) as refused:
        east.get_service_quota(ServiceCode="ec2", QuotaCode="L-00000000")
    assert refused.value.response["Error"]["Code"] == "NoSuchResourceException"
    # moto's own VPC quotas still answer.
    assert east.list_aws_default_service_quotas(ServiceCode="vpc")["Quotas"]


def test_sagemaker_quotas_are_listed_by_name_in_pages(emulator):
    client = emulator.client("service-quotas", "eu-west-1")
    ACCOUNT.set_quota("sagemaker", "ml.p3.16xlarge for training job usage", 10)
    pages = list(client.get_paginator("list_service_quotas").paginate(
        ServiceCode="sagemaker", PaginationConfig={"PageSize": 5}))
    quotas = {q["QuotaName"]: q["Value"] for page in pages for q in page["Quotas"]}
    assert len(pages) > 1 and all(len(page["Quotas"]) <= 5 for page in pages)
    assert quotas["ml.p3.16xlarge for training job usage"] == 10
    assert quotas["ml.p3.16xlarge for spot training job usage"] == 0


def test_lambda_account_settings_count_what_functions_reserve(emulator):
    lam = emulator.client("lambda")
    ACCOUNT.set_quota("lambda", "Concurrent executions", 1000)
    iam = emulator.client("iam")
    role = iam.create_role(RoleName="fn", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    lam.create_function(FunctionName="one", Runtime="python3.12", Role=role,
                        Handler="app.handler", Code={"ZipFile": b"code"})
    lam.put_function_concurrency(FunctionName="one", ReservedConcurrentExecutions=3)
    settings = lam.get_account_settings()
    assert settings["AccountLimit"]["ConcurrentExecutions"] == 1000
    assert settings["AccountLimit"]["UnreservedConcurrentExecutions"] == 997
    assert settings["AccountUsage"]["FunctionCount"] == 1


@pytest.mark.parametrize(("service", "call", "code"), [
    ("service-quotas", lambda c: c.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B"),
     "AccessDeniedException"),  # JSON
    ("lambda", lambda c: c.get_account_settings(), "AccessDeniedException"),  # REST-JSON
    ("iam", lambda c: c.list_roles(), "AccessDenied"),  # query
    ("ec2", lambda c: c.describe_vpcs(), "UnauthorizedOperation"),  # EC2's own
])
def test_a_denied_action_is_refused_as_its_service_refuses(emulator, service, call, code):
    client = emulator.client(service)
    call(client)
    action = f"{client.meta.service_model.signing_name}:" + {
        "service-quotas": "GetServiceQuota", "lambda": "GetAccountSettings",
        "iam": "ListRoles", "ec2": "DescribeVpcs"}[service]
    ACCOUNT.denied.add(action)
    with pytest.raises(ClientError) as refused:
        call(client)
    assert refused.value.response["Error"]["Code"] == code
    assert f"is not authorized to perform: {action}" in refused.value.response["Error"]["Message"]


def test_the_caller_is_an_iam_user_the_simulator_answers_for(emulator):
    caller = emulator.client("sts").get_caller_identity()["Arn"]
    assert caller == "arn:aws:iam::123456789012:user/traingrid-emulator"
    iam = emulator.client("iam")
    ACCOUNT.denied.add("iam:CreateServiceLinkedRole")
    results = iam.simulate_principal_policy(
        PolicySourceArn=caller, ActionNames=["iam:CreateServiceLinkedRole", "fsx:CreateFileSystem"]
    )["EvaluationResults"]
    assert [r["EvalDecision"] for r in results] == ["implicitDeny", "allowed"]


def test_fsx_service_linked_role_has_awss_name_and_a_new_session_a_new_account(monkeypatch):
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with Emulator() as emulator:
        role = emulator.client("iam").create_service_linked_role(
            AWSServiceName="fsx.amazonaws.com")["Role"]
        assert role["RoleName"] == "AWSServiceRoleForAmazonFSx"
        assert role["Path"] == "/aws-service-role/fsx.amazonaws.com/"
        ACCOUNT.set_quota("lambda", "L-B99A9384", 1000)
        ACCOUNT.denied.add("iam:ListRoles")
    with Emulator() as fresh:
        assert fresh.client("lambda").get_account_settings()["AccountLimit"][
            "ConcurrentExecutions"] == 10
        assert fresh.client("iam").list_roles()["Roles"] == []
