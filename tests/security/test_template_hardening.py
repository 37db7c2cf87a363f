"""The deployed stack as an attacker inside a container, or inside a function, would find it:
the instance's metadata (and so the instance role's credentials) out of a job's reach, the
database owner's secret out of every function's but the migration's, and the job privileged
only for the one thing Batch gives no narrower way to do. Read from the template as the SAM
transform translates it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.iam_actions import as_list, statements
from traingrid_local.emulator.deploy import package, translate
from traingrid_local.templates import load_template

ROOT = Path(__file__).resolve().parents[2]
MASTER_SECRET = {"Fn::If": ["CreateDatabase",
                            {"Fn::GetAtt": ["DatabaseCluster", "MasterUserSecret.SecretArn"]},
                            {"Ref": "DatabaseSecretArn"}]}
APP_SECRET = {"Fn::If": ["CreateDatabase", {"Ref": "DatabaseAppSecret"},
                         {"Ref": "DatabaseAppSecretArn"}]}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def translated(template) -> dict[str, Any]:
    return translate(package(template, upload=lambda key, body: None))


def launch_templates(translated) -> dict[str, dict[str, Any]]:
    """Every launch template the training compute environment launches nodes from."""
    resources = translated["Resources"]
    compute = resources["TrainingComputeEnvironment"]["Properties"]["ComputeResources"]
    names = [compute["LaunchTemplate"]["LaunchTemplateId"]["Ref"]]
    for item in compute["LaunchTemplate"]["Overrides"]:
        names.append(item["Fn::If"][1]["LaunchTemplateId"]["Ref"])
    assert {n for n, r in resources.items() if r["Type"] == "AWS::EC2::LaunchTemplate"} \
        == set(names), "a launch template the compute environment does not use"
    return {name: resources[name]["Properties"]["LaunchTemplateData"] for name in names}


def test_no_container_reaches_the_instance_metadata(translated):
    """IMDSv2 only, one hop (a container's packets take two), and the ECS agent blocks the
    metadata address for awsvpc tasks, which every multi-node job is. Jobs get credentials
    from their job role through the agent's endpoint, which stays on."""
    problems = []
    for name, data in launch_templates(translated).items():
        options = data["MetadataOptions"]
        if options.get("HttpTokens") != "required":
            problems.append(f"{name}: IMDSv1 allowed")
        if options.get("HttpPutResponseHopLimit") != 1:
            problems.append(f"{name}: hop limit {options.get('HttpPutResponseHopLimit')}")
        user_data = data["UserData"]["Fn::Base64"]
        config = [line.strip() for line in user_data.splitlines()]
        for setting in ("ECS_AWSVPC_BLOCK_IMDS=true", "ECS_ENABLE_TASK_IAM_ROLE=true"):
            if setting not in config:
                problems.append(f"{name}: user data does not set {setting}")
        if "/etc/ecs/ecs.config" not in user_data:
            problems.append(f"{name}: user data does not write the ECS agent's config")
    assert not problems, "\n".join(problems)


def _secret_reads(translated) -> dict[str, list[Any]]:
    """Function logical id → the secrets its role may read."""
    reads = {}
    for logical_id, resource in translated["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        role = translated["Resources"][resource["Properties"]["Role"]["Fn::GetAtt"][0]]
        reads[logical_id] = [r for s in statements(role)
                             if any(a.startswith("secretsmanager:") for a in as_list(s["Action"]))
                             for r in as_list(s["Resource"])]
    return reads


def test_only_the_migration_may_read_the_database_owners_secret(translated):
    reads = _secret_reads(translated)
    owners = sorted(f for f, secrets in reads.items() if MASTER_SECRET in secrets)
    assert owners == ["MigrateDatabaseFunction"]
    assert APP_SECRET in reads["MigrateDatabaseFunction"]
    for function, secrets in reads.items():
        assert all(s in (MASTER_SECRET, APP_SECRET) for s in secrets), (function, secrets)


def test_every_function_signs_in_with_the_secret_its_role_may_read(translated):
    for logical_id, resource in translated["Resources"].items():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        if "DATABASE_SECRET_ARN" not in variables:
            continue
        expected = MASTER_SECRET if logical_id == "MigrateDatabaseFunction" else APP_SECRET
        assert variables["DATABASE_SECRET_ARN"] == expected, logical_id
        assert expected in _secret_reads(translated)[logical_id], logical_id


def test_the_functions_role_secret_is_generated_and_own_databases_name_theirs(template):
    secret = template["Resources"]["DatabaseAppSecret"]
    assert secret["Condition"] == "CreateDatabase"
    generated = secret["Properties"]["GenerateSecretString"]
    owner = template["Resources"]["DatabaseCluster"]["Properties"]["MasterUsername"]
    assert json.loads(generated["SecretStringTemplate"])["username"] not in ("", owner)
    assert generated["GenerateStringKey"] == "password" and generated["PasswordLength"] >= 32
    rule = template["Rules"]["OwnDatabaseNamesTheFunctionsRole"]
    assert rule["RuleCondition"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "DatabaseSecretArn"},
                                                                 ""]}]}
    assert rule["Assertions"][0]["Assert"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "DatabaseAppSecretArn"}, ""]}]}


def test_the_job_is_privileged_only_to_mount_the_runs_file_system(template):
    """Batch's job definitions have no capability list: mounting Lustre in the container needs
    privileged. So it is privileged exactly while the node program mounts Lustre, and the
    template and checkov's skip say so."""
    container = (template["Resources"]["TrainingJobDefinition"]["Properties"]["NodeProperties"]
                 ["NodeRangeProperties"][0]["Container"])
    host = (ROOT / "containers/mnp/traingrid_node/host.py").read_text()
    mounts_lustre = '"mount", "-t", "lustre"' in host
    assert container.get("Privileged", False) == mounts_lustre, (
        "the node program mounts Lustre in the container" if mounts_lustre else
        "no Lustre mount found in traingrid_node/host.py: nothing left needs privileged")
    if mounts_lustre:
        skips = template["Resources"]["TrainingJobDefinition"]["Metadata"]["checkov"]["skip"]
        (skip,) = [s for s in skips if s["id"] == "CKV_AWS_210"]
        assert "Lustre" in skip["comment"] and "LinuxParameters" in skip["comment"]
        assert "Devices" not in container.get("LinuxParameters", {}), \
            "a privileged container sees every device: a device list would only mislead"
