"""template.yaml and the state machines: valid, consistent with each other, least privilege."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.iam_actions import as_list, statements, with_attached
from traingrid.api import resolver
from traingrid.campaigns.fanout_request import FanoutRequest
from traingrid.settings import ApiSettings
from traingrid.training.plan import DEFAULT_TRAIN_COMMAND, job_environment
from traingrid.training.run_request import TrainingRunRequest
from traingrid.vocabulary.catalog import INSTANCE_TYPES, job_memory_mib, resource_requirements
from traingrid_local.emulator.deploy import stand_in_environment
from traingrid_local.schemas import SCHEMA_DIR, SCHEMAS, render
from traingrid_local.templates import TEMPLATE, load_template, template_files

ROOT = TEMPLATE.parent
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9]+)\}")
# Actions that AWS does not scope to resources (their Resource must be "*").
UNSCOPED_ACTIONS = {
    "fsx:DescribeFileSystems", "fsx:DescribeDataRepositoryTasks", "batch:DescribeJobs",
    "batch:ListJobs", "sagemaker:ListTrainingJobs",
    "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeVpcs",
    "ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces",
    "xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
    "xray:GetSamplingTargets", "logs:CreateLogDelivery", "logs:GetLogDelivery",
    "logs:UpdateLogDelivery", "logs:DeleteLogDelivery", "logs:ListLogDeliveries",
    "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
    "ecr:GetAuthorizationToken", "cloudwatch:PutMetricData",
    # A task token is its own scope: SendTaskSuccess has no resource-level permissions.
    "states:SendTaskSuccess",
    # A queued job's capacity (training/capacity.py): none has resource-level permissions.
    "batch:DescribeJobQueues", "batch:DescribeComputeEnvironments",
    "autoscaling:DescribeScalingActivities",
    # A fan-out's curves (runs/region_curves.py): GetMetricData has no resource-level
    # permissions (only PutMetricData has a condition key, its namespace).
    "cloudwatch:GetMetricData",
}


def all_states(definition: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every state, including those of Map and Parallel branches."""
    found = dict(definition["States"])
    for state in definition["States"].values():
        for branch in [state.get("ItemProcessor") or state.get("Iterator"),
                       *state.get("Branches", [])]:
            if branch:
                found |= all_states(branch)
    return found


def branches(definition: dict[str, Any]) -> list[dict[str, Any]]:
    """The definition and every nested branch: each has its own StartAt and States."""
    found = [definition]
    for state in definition["States"].values():
        for branch in [state.get("ItemProcessor") or state.get("Iterator"),
                       *state.get("Branches", [])]:
            if branch:
                found += branches(branch)
    return found


def state_machines(template) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """logical id → (properties, ASL definition)"""
    found = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::StateMachine":
            props = resource["Properties"]
            found[logical_id] = (props, json.loads((ROOT / props["DefinitionUri"]).read_text()))
    return found


def test_cfn_lint_is_clean():
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    files = [*map(str, template_files()), str(ROOT / "regional/template.yaml")]
    result = subprocess.run([str(cfn_lint), *files], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_translates_offline(translated):
    types = {r["Type"] for r in translated["Resources"].values()}
    assert {"AWS::Lambda::Function", "AWS::StepFunctions::StateMachine", "AWS::Events::Rule",
            "AWS::Lambda::LayerVersion", "AWS::Batch::JobDefinition"} <= types
    assert not any(t.startswith("AWS::Serverless::") for t in types)


def test_placeholders_match_substitutions_exactly(template):
    for logical_id, (props, definition) in state_machines(template).items():
        text = json.dumps(definition)
        assert set(PLACEHOLDER.findall(text)) == set(props["DefinitionSubstitutions"]), logical_id


def _targets(state: dict[str, Any]) -> list[str]:
    found = [state[k] for k in ("Next", "Default") if k in state]
    found += [c["Next"] for c in state.get("Catch", [])]
    found += [c["Next"] for c in state.get("Choices", [])]
    return found


def test_every_transition_target_exists_and_every_state_is_reachable(template):
    for definition in (b for _, d in state_machines(template).values() for b in branches(d)):
        states = definition["States"]
        assert definition["StartAt"] in states
        for name, state in states.items():
            for target in _targets(state):
                assert target in states, f"{name} → {target}"
            ends = state.get("End") or state["Type"] in ("Succeed", "Fail")
            assert ends or _targets(state), f"{name} neither ends nor moves on"
        reachable, frontier = set(), [definition["StartAt"]]
        while frontier:
            name = frontier.pop()
            if name not in reachable:
                reachable.add(name)
                frontier += _targets(states[name])
        assert reachable == set(states)


def test_every_aws_task_retries_throttling_with_full_jitter(template):
    for _, definition in state_machines(template).values():
        for name, state in all_states(definition).items():
            if state["Type"] != "Task":
                continue
            retries = state.get("Retry", [])
            assert retries, f"{name} has no Retry"
            assert all(r.get("JitterStrategy") == "FULL" and r.get("BackoffRate", 1) > 1
                       for r in retries), name
            names = {e for r in retries for e in r["ErrorEquals"]}
            assert any("Throttling" in e or "TooManyRequests" in e for e in names), name


def test_every_failure_ends_in_a_readable_fail_state(template):
    for name, (_, definition) in state_machines(template).items():
        fails = [s for s in definition["States"].values() if s["Type"] == "Fail"]
        assert all("CausePath" in s or "Cause" in s for s in fails)
        # A fan-out's region branch never fails: it hands every outcome, even one it could not
        # record, to its fan-out (whose FinishFanout records it and fails readably).
        assert fails or name == "CampaignRegionStateMachine"


def test_job_environment_in_the_state_machine_matches_the_plan(template):
    _, definition = state_machines(template)["TrainingRunStateMachine"]
    submit = definition["States"]["SubmitTrainingJob"]["Parameters"]
    overrides = submit["NodeOverrides"]["NodePropertyOverrides"][0]["ContainerOverrides"]
    names = {e["Name"] for e in overrides["Environment"]}
    request = TrainingRunRequest(dataset="s3://bkt/d/")
    assert names == set(job_environment(request, "r", 8)) | {"FSX_DNS_NAME", "FSX_MOUNT_NAME"}


def test_state_machine_role_invokes_each_function_it_names(template, translated):
    """Which actions a state machine's role grants: test_least_privilege.py."""
    for logical_id, (props, _) in state_machines(template).items():
        role = translated["Resources"][f"{logical_id}Role"]
        invoked = {json.dumps(s["Resource"]) for s in statements(role)
                   if "lambda:InvokeFunction" in as_list(s["Action"])}
        for name in (n for n in props["DefinitionSubstitutions"] if n.endswith("FunctionArn")):
            function = name.removesuffix("Arn")
            assert any(function in r for r in invoked), f"{logical_id} cannot invoke {function}"


def test_no_wildcard_actions_and_resources_scoped_where_aws_allows(translated):
    regional = load_template(ROOT / "regional/template.yaml")
    for logical_id, resource in (translated["Resources"] | regional["Resources"]).items():
        if resource["Type"] not in ("AWS::IAM::Role", "AWS::IAM::Policy"):
            continue
        for statement in statements(resource):
            actions = as_list(statement["Action"])
            assert "*" not in actions and not any(a.endswith(":*") for a in actions), logical_id
            if "*" in as_list(statement["Resource"]):
                unscoped = [a for a in actions if a not in UNSCOPED_ACTIONS]
                assert not unscoped, f"{logical_id}: {unscoped} on Resource *"


def test_every_function_folder_has_a_thin_handler(template):
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        app = ROOT / resource["Properties"]["CodeUri"] / "app.py"
        tree = ast.parse(app.read_text())
        handlers = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        assert [h.name for h in handlers] == ["lambda_handler"], logical_id
        assert len(handlers[0].body) <= 3, f"{logical_id}'s handler is not thin"


# Imports sit at the top of modules (tests/unit/test_imports_at_top.py); the database's names
# load SQLAlchemy on first use (``traingrid.db``), so only the deploy-time migration loads it at
# a cold start, and the API (a person waits) loads pydantic only for a request that needs it.
# ``make bench`` holds the times, this test what is loaded.
API = "api"
SQLALCHEMY_AT_COLD_START = {"migrate_database"}
IDEMPOTENCY = "aws_lambda_powertools.utilities.idempotency"


@pytest.mark.parametrize("function", sorted(p.name for p in (ROOT / "functions").iterdir()))
def test_a_cold_start_loads_only_what_every_request_needs(function):
    """Import the handler as Lambda does and look at what got loaded: no SQLAlchemy but in the
    migration (a function without the database layer could not import it), no idempotency
    utility (loaded by the first API request that carries a key), no pydantic in the API."""
    code = ("import importlib.util, sys; "
            "spec = importlib.util.spec_from_file_location('app', sys.argv[1]); "
            "spec.loader.exec_module(importlib.util.module_from_spec(spec)); "
            f"print(sorted(m for m in ('sqlalchemy', 'moto', 'traingrid_local', '{IDEMPOTENCY}', "
            "'pydantic') if m in sys.modules))")
    result = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "functions" / function / "app.py")],
        capture_output=True, text=True, timeout=60, check=True,
        env={"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1"}
        | stand_in_environment(),
    )
    loaded = json.loads(result.stdout.strip().replace("'", '"'))
    assert "moto" not in loaded and "traingrid_local" not in loaded
    assert ("sqlalchemy" in loaded) == (function in SQLALCHEMY_AT_COLD_START), \
        f"{function}: {loaded}"
    assert IDEMPOTENCY not in loaded, f"{function}: {loaded}"
    if function == API:
        assert "pydantic" not in loaded, loaded


def test_runtime_never_imports_local_only_code():
    forbidden = ("traingrid_local", "moto", "typer", "rich", "samtranslator")
    for path in [*ROOT.glob("layers/traingrid/python/**/*.py"), *ROOT.glob("functions/*/app.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split(".")[0] not in forbidden, f"{path} imports {name}"


def test_layer_dependency_pins_match_the_project():
    pins = {line.split("==")[0].split("[")[0].lower(): line.split("==")[1]
            for line in (ROOT / "layers/dependencies/requirements.txt").read_text().splitlines()
            if "==" in line and not line.startswith("#")}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {d.split("==")[0].lower(): d.split("==")[1] for d in project}
    for name, version in pins.items():
        assert declared[name] == version, name


def test_json_schemas_are_generated_from_the_models():
    for name, model in SCHEMAS.items():
        assert (SCHEMA_DIR / name).read_text() == render(model), f"run make schema ({name})"


def test_schema_example_is_a_valid_request():
    example = json.loads((SCHEMA_DIR / "examples/training-run-request.json").read_text())
    assert TrainingRunRequest.model_validate(example).nodes == example["nodes"]


# --- The API -----------------------------------------------------------------------------------

OPENAPI = ROOT / "schema" / "openapi.yaml"


def _rest_api(translated) -> dict[str, Any]:
    (api,) = [r["Properties"] for r in translated["Resources"].values()
              if r["Type"] == "AWS::ApiGateway::RestApi"]
    return api


def _operations(paths: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(method.upper(), path): operation for path, methods in paths.items()
            for method, operation in methods.items()
            if method in ("get", "post", "put", "patch", "delete")}


def test_every_api_method_requires_a_signed_iam_request(translated):
    body = _rest_api(translated)["Body"]
    scheme = body["components"]["securitySchemes"]["AWS_IAM"]
    assert scheme["x-amazon-apigateway-authtype"] == "awsSigv4"
    operations = _operations(body["paths"])
    assert operations
    for route, operation in operations.items():
        assert operation["security"] == [{"AWS_IAM": []}], route
        integration = operation["x-amazon-apigateway-integration"]
        # API Gateway invokes the function itself; callers need no lambda:InvokeFunction.
        assert integration["type"] == "aws_proxy" and "credentials" not in integration, route


def test_the_api_is_regional_traced_logged_and_open_only_to_its_account(template, translated):
    api = _rest_api(translated)
    assert api["EndpointConfiguration"] == {"Types": ["REGIONAL"]}
    statements = api["Body"]["x-amazon-apigateway-policy"]["Statement"]
    assert statements and all(s["Principal"] == {"AWS": [{"Ref": "AWS::AccountId"}]}
                              for s in statements if s["Effect"] == "Allow")
    (stage,) = [r["Properties"] for r in translated["Resources"].values()
                if r["Type"] == "AWS::ApiGateway::Stage"]
    assert stage["TracingEnabled"] is True
    assert stage["AccessLogSetting"]["DestinationArn"] == {
        "Fn::GetAtt": ["ApiAccessLogGroup", "Arn"]}
    table = template["Resources"]["IdempotencyTable"]["Properties"]
    assert table["SSESpecification"] == {"SSEEnabled": True}
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}


def _resolver_routes() -> set[tuple[str, str]]:
    settings = ApiSettings.from_env({
        "DATA_BUCKET": "b", "TRAINING_RUN_STATE_MACHINE_ARN": "t",
        "CAMPAIGN_FANOUT_STATE_MACHINE_ARN": "c", "IDEMPOTENCY_TABLE": "i",
        "DATABASE_SECRET_ARN": "s"})
    app = resolver.build(settings)
    return {(r.method, r.openapi_path) for r in app._static_routes + app._dynamic_routes}


def test_openapi_document_template_and_function_routes_agree(monkeypatch, template):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    document = yaml.safe_load(OPENAPI.read_text())
    documented = set(_operations(document["paths"]))
    events = template["Resources"]["ApiFunction"]["Properties"]["Events"].values()
    declared = {(e["Properties"]["Method"].upper(), e["Properties"]["Path"]) for e in events
                if e["Type"] == "Api"}
    assert documented == declared == _resolver_routes()


def test_openapi_document_uses_the_generated_request_schemas():
    document = yaml.safe_load(OPENAPI.read_text())
    bodies = {route: operation["requestBody"]["content"]["application/json"]
              for route, operation in _operations(document["paths"]).items()
              if "content" in operation.get("requestBody", {})}
    # Acting on a run (cancel, rerun) takes no fields: an empty object, declared once.
    empty = {route for route, operation in _operations(document["paths"]).items()
             if operation.get("requestBody") == {"$ref": "#/components/requestBodies/NoFields"}}
    assert empty == {("POST", "/runs/{name}/cancel"), ("POST", "/runs/{name}/rerun")}
    no_fields = document["components"]["requestBodies"]["NoFields"]["content"]
    assert no_fields["application/json"]["schema"]["maxProperties"] == 0
    assert bodies[("POST", "/runs")]["schema"]["$ref"] == "./training-run-request.schema.json"
    assert bodies[("POST", "/campaigns/{campaign_id}/runs")]["schema"]["$ref"] == (
        "./campaign-fanout-request.schema.json")
    for content in bodies.values():
        for ref in (content["schema"]["$ref"], content["example"]["$ref"]):
            assert (OPENAPI.parent / ref).is_file(), ref
    assert set(SCHEMAS) <= {c["schema"]["$ref"].removeprefix("./") for c in bodies.values()}


def test_fanout_example_is_a_valid_request():
    example = json.loads((SCHEMA_DIR / "examples/campaign-fanout-request.json").read_text())
    assert FanoutRequest.model_validate(example).datasets == "all"


def test_retraining_runs_on_a_schedule_parameter(template, translated):
    function = template["Resources"]["RetrainCampaignsFunction"]["Properties"]
    (event,) = function["Events"].values()
    assert event["Type"] == "Schedule"
    assert event["Properties"]["Schedule"] == {"Ref": "RetrainSchedule"}
    assert template["Parameters"]["RetrainSchedule"]["Default"].startswith("cron(")
    rules = [r["Properties"] for r in translated["Resources"].values()
             if r["Type"] == "AWS::Events::Rule" and "ScheduleExpression" in r["Properties"]]
    assert {"Ref": "RetrainSchedule"} in [r["ScheduleExpression"] for r in rules]


def test_state_machines_log_and_trace(template):
    for logical_id, (props, _) in state_machines(template).items():
        assert props["Tracing"] == {"Enabled": True}, logical_id
        assert props["Logging"]["Level"] == {"Ref": "StateMachineLogLevel"}, logical_id
        (destination,) = props["Logging"]["Destinations"]
        group = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
        retention = template["Resources"][group]["Properties"]["RetentionInDays"]
        assert retention == {"Ref": "LogRetentionDays"}, logical_id
    outputs = template["Outputs"]
    assert {"ApiUrl", "TrainingRunConsoleUrl", "CampaignFanoutConsoleUrl"} <= set(outputs)


def test_the_janitor_runs_on_a_schedule_and_when_a_run_ends_uncleanly(template, translated):
    function = template["Resources"]["JanitorFunction"]["Properties"]
    events = function["Events"]
    assert events["Sweep"]["Properties"]["Schedule"] == {"Ref": "JanitorSchedule"}
    assert template["Parameters"]["JanitorSchedule"]["Default"] == "rate(5 minutes)"
    pattern = events["ExecutionEnded"]["Properties"]["Pattern"]
    assert pattern["detail-type"] == ["Step Functions Execution Status Change"]
    assert set(pattern["detail"]["status"]) == {"ABORTED", "TIMED_OUT", "FAILED"}
    machines = [m["Ref"] for m in pattern["detail"]["stateMachineArn"]]
    # The pipelines a user starts; a region's branch ends into its fan-out, which records it.
    assert sorted(machines) == sorted(set(state_machines(template)) - {
        "CampaignRegionStateMachine"})
    # Passes never overlap: they hold a lease (tests/unit/test_janitor_lease.py), and reserve no
    # concurrency, which an account of 10 concurrent executions cannot give.
    assert "ReservedConcurrentExecutions" not in function
    assert function["Environment"]["Variables"]["JANITOR_LEASE_TABLE"] == {
        "Ref": "JanitorLeaseTable"}
    # Every pass wakes the training waits whose job ended without its event, so the waits'
    # own timeout (their fallback check) can be a day.
    assert function["Environment"]["Variables"]["JOB_TOKENS_TABLE"] == {"Ref": "JobTokensTable"}
    assert template["Parameters"]["JobEventFallbackSeconds"]["Default"] == 86400


def test_the_janitor_may_delete_and_stop_only_what_this_stacks_runs_tagged(translated):
    role = translated["Resources"]["JanitorFunctionRole"]
    for action, machine in (("fsx:DeleteFileSystem", "TrainingRunStateMachine"),
                            ("fsx:TagResource", "TrainingRunStateMachine"),
                            ("sagemaker:StopTrainingJob", "CampaignFanoutStateMachine")):
        (statement,) = [s for s in statements(role) if action in as_list(s["Action"])]
        condition = statement["Condition"]["StringLike"]["aws:ResourceTag/traingrid:execution"]
        assert f"${{{machine}.Name}}:*" in condition["Fn::Sub"], action


def test_a_region_s_job_is_stopped_only_when_this_stack_s_fanout_tagged_it(translated):
    # By the state machine's Name: CloudFormation names it `<LogicalId>-<random>`, without
    # the stack's name; the policy stands apart from the role to avoid a circular reference.
    role = with_attached(translated, "StopRegionJobFunctionRole")
    (statement,) = [s for s in statements(role)
                    if "sagemaker:StopTrainingJob" in as_list(s["Action"])]
    condition = statement["Condition"]["StringLike"]["aws:ResourceTag/traingrid:execution"]
    assert ":execution:${CampaignFanoutStateMachine.Name}:*" in condition["Fn::Sub"]


def test_every_function_logs_to_the_stacks_encrypted_log_group(translated):
    """Not Lambda's default /aws/lambda/<name> group, which has no retention and no stack key."""
    resources = translated["Resources"]
    functions = {logical_id: r["Properties"] for logical_id, r in resources.items()
                 if r["Type"] == "AWS::Lambda::Function"}
    assert len(functions) >= 20
    for logical_id, properties in functions.items():
        group = properties.get("LoggingConfig", {}).get("LogGroup", {}).get("Ref")
        assert group == "FunctionLogGroup", logical_id
    group = resources["FunctionLogGroup"]["Properties"]
    assert {"KmsKeyId", "RetentionInDays"} <= set(group)


def test_the_job_definition_runs_the_trainer_sized_to_what_its_node_registers(template):
    """Its command is the default a plan passes; its resources are the catalog's rule for its
    instance type (memory above what Batch registers would leave the job RUNNABLE)."""
    container = (template["Resources"]["TrainingJobDefinition"]["Properties"]["NodeProperties"]
                 ["NodeRangeProperties"][0]["Container"])
    assert tuple(container["Command"]) == DEFAULT_TRAIN_COMMAND
    instance = INSTANCE_TYPES[container["InstanceType"]]
    assert container["ResourceRequirements"] == resource_requirements(instance)
    assert job_memory_mib(instance) < instance.memory_mib * 0.975 - 32


@pytest.mark.parametrize("instance", INSTANCE_TYPES.values(), ids=INSTANCE_TYPES)
def test_every_catalog_type_leaves_what_batch_and_ecs_keep(instance):
    # AWS documents an m4.large registering 7,985 of its 8,192 MiB (97.5%), less 32 MiB that
    # the AMI keeps for the ECS agent; the rule keeps 5% besides.
    assert job_memory_mib(instance) <= int(instance.memory_mib * 7985 / 8192) - 32
    assert instance.memory_mib - job_memory_mib(instance) >= instance.memory_mib * 0.05


def test_every_node_gets_the_lustre_client_and_efa_types_their_interfaces(template):
    resources = template["Resources"]
    compute = resources["TrainingComputeEnvironment"]["Properties"]["ComputeResources"]
    base = resources[compute["LaunchTemplate"]["LaunchTemplateId"]["Ref"]]
    efa_types = {name: t for name, t in INSTANCE_TYPES.items() if t.efa_interfaces}
    overrides = {}
    for item in compute["LaunchTemplate"]["Overrides"]:
        condition, override, _ = item["Fn::If"]
        (target,) = override["TargetInstanceTypes"]
        overrides[target] = resources[override["LaunchTemplateId"]["Ref"]]
    assert set(overrides) == set(efa_types)
    for launch_template in [base, *overrides.values()]:
        data = launch_template["Properties"]["LaunchTemplateData"]
        assert data["MetadataOptions"]["HttpTokens"] == "required"
        script = data["UserData"]["Fn::Base64"]
        assert script.startswith("MIME-Version: 1.0") and "modprobe lustre" in script
        assert all(d["Ebs"]["Encrypted"] for d in data["BlockDeviceMappings"])
    for name, launch_template in overrides.items():
        interfaces = launch_template["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
        assert len(interfaces) == efa_types[name].efa_interfaces, name
        assert [i["NetworkCardIndex"] for i in interfaces] == list(range(len(interfaces)))
        assert all(i["Groups"] for i in interfaces)
        assert [i["DeviceIndex"] for i in interfaces][:1] == [0]
        # The primary interface is EFA with ENA (an EFA-only one cannot be primary); on p5
        # the other 31 are EFA-only and take no address.
        expected = ["efa"] + ["efa-only" if name == "p5.48xlarge" else "efa"] * (
            len(interfaces) - 1)
        assert [i["InterfaceType"] for i in interfaces] == expected, name


def test_the_plan_tells_a_node_its_efa_devices(template):
    for name, instance in INSTANCE_TYPES.items():
        request = TrainingRunRequest(dataset="s3://data/set/", instance_type=name)
        env = job_environment(request, "r1", 8)
        assert env["TRAINGRID_EFA_DEVICES"] == str(instance.efa_interfaces)
        assert env["TRAINGRID_EFA_RDMA"] == ("1" if instance.efa_rdma else "0")
