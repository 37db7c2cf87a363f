"""Adaptation (moto 5.2.5): CloudFormation creates what our template declares, as AWS does.

- ``AWS::Lambda::Function`` keeps its ``Layers`` and ``LoggingConfig`` (moto drops them);
- ``AWS::Lambda::LayerVersion`` has a physical id, so ``Ref`` yields its ARN;
- ``AWS::S3::Bucket`` honours ``NotificationConfiguration.EventBridgeConfiguration``;
- ``AWS::Batch::JobDefinition`` keeps its type (``multinode``), node properties and optional
  retry strategy (moto forces ``container`` and requires a retry strategy);
- ``AWS::Batch::ComputeEnvironment`` without ``ServiceRole`` uses the Batch service-linked role,
  created on first use as AWS does (moto requires the property), and its
  ``EksConfiguration`` (moto drops it) for a cluster that exists (:mod:`.batch_pods`);
- ``AWS::NoValue`` in a list takes its item out of the list, as CloudFormation does (moto
  leaves ``None`` there: a compute environment's instance types or launch template
  overrides, a queue's compute environment order chosen by conditions);
- a template given as JSON is read as JSON (moto reads every template with PyYAML's Python
  loader first, a second or more for TrainGrid's on every deploy); YAML stays YAML;
- parameter defaults are typed like passed values (moto leaves a ``CommaDelimitedList`` default
  a string and a ``Number`` default text); ``DescribeStacks`` gives a list parameter as AWS
  does, ``a,b`` (moto gives Python's ``['a', 'b']``);
- what the template leaves unnamed gets the physical name CloudFormation gives it
  (:data:`NAMING`): a state machine is ``<LogicalId>-<12 random>``, with no stack prefix, Batch
  resources ``<LogicalId>-<16 random>``, functions, roles, rules, queues and tables
  ``<stack>-<LogicalId>-<random>`` cut to the type's length limit (moto prefixes every name
  with the stack's and never cuts); a given name (``StateMachineName``, ``LayerName``) is kept.
  A policy written against a guessed name then fails here as it would on AWS.
- a nested stack (``AWS::CloudFormation::Stack``) is named ``<parent>-<LogicalId>-<13
  random>``, as CloudFormation names it (moto: its logical id), so its resources' names carry
  it; ``!GetAtt <Nested>.Outputs.<Name>`` is that output's value (moto: nothing), and one the
  nested stack does not have fails the deploy, as on AWS; a list passed to a nested stack's
  parameter fails it too ("You can't pass values of type CommaDelimitedList to a nested
  stack", AWS Knowledge Center: join it in the parent), where moto passes it on.
"""

from __future__ import annotations

import contextlib
import json
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moto.awslambda.models import LambdaFunction, LayerVersion
from moto.batch.models import ComputeEnvironment, JobDefinition, batch_backends
from moto.batch.utils import lowercase_first_key
from moto.cloudformation import parsing
from moto.cloudformation.models import Stack as FakeStack
from moto.cloudformation.parsing import ResourceMap
from moto.iam.models import iam_backends
from moto.moto_api._internal import mock_random
from moto.s3.models import FakeBucket

from traingrid_local.emulator import batch_pods
from traingrid_local.emulator.patching import PATCHES, original_function

_UPPER = string.ascii_uppercase + string.digits
_MIXED = string.ascii_letters + string.digits


@dataclass(frozen=True)
class Naming:
    """How CloudFormation names a resource of one type that its template leaves unnamed."""

    prop: str  # the property that names it when given
    limit: int  # the longest name the service takes
    stack_prefix: bool = True  # ``<stack>-<LogicalId>-…``, else ``<LogicalId>-…``
    suffix: int = 12
    alphabet: str = _UPPER
    lower: bool = False

    def generate(self, stack: str, logical_id: str) -> str:
        suffix = "".join(mock_random.choice(self.alphabet) for _ in range(self.suffix))
        room = self.limit - len(suffix) - 1  # for the parts before "-<suffix>"
        if self.stack_prefix:
            room -= 1
            # Both parts are cut when they do not fit: the stack's name to half the room
            # first, then the logical id.
            stack = stack[:max(room - len(logical_id), room // 2)]
            name = f"{stack}-{logical_id[:room - len(stack)]}-{suffix}"
        else:
            name = f"{logical_id[:room]}-{suffix}"
        return name.lower() if self.lower else name


# The types TrainGrid's templates create, as CloudFormation names them (seen in deployed
# stacks: ``sam-app-HelloWorldFunction-yQDNe17r9maD``, ``sam-app-HelloWorldFunctionRole-
# URQ6NEJVAE9X``, ``StateMachine-KcY9t10Lo2vV``, ``JobQueue-rivR3vgrh6ipJHfa``).
NAMING = {
    "AWS::StepFunctions::StateMachine": Naming("StateMachineName", 80, stack_prefix=False,
                                               alphabet=_MIXED),
    "AWS::Lambda::Function": Naming("FunctionName", 64, alphabet=_MIXED),
    "AWS::Lambda::LayerVersion": Naming("LayerName", 140, alphabet=_MIXED),
    "AWS::IAM::Role": Naming("RoleName", 64),
    "AWS::IAM::InstanceProfile": Naming("InstanceProfileName", 128),
    "AWS::Events::Rule": Naming("Name", 64),
    "AWS::SQS::Queue": Naming("QueueName", 80, alphabet=_MIXED),
    "AWS::DynamoDB::Table": Naming("TableName", 255),
    "AWS::S3::Bucket": Naming("BucketName", 63, lower=True),
    "AWS::Batch::ComputeEnvironment": Naming("ComputeEnvironmentName", 128, stack_prefix=False,
                                             suffix=16, alphabet=_MIXED),
    "AWS::Batch::JobQueue": Naming("JobQueueName", 128, stack_prefix=False, suffix=16,
                                   alphabet=_MIXED),
    "AWS::Batch::JobDefinition": Naming("JobDefinitionName", 128, stack_prefix=False,
                                        suffix=16, alphabet=_MIXED),
    # RDS takes lowercase identifiers of 63 at most, beginning with a letter.
    "AWS::RDS::DBCluster": Naming("DBClusterIdentifier", 63, lower=True),
    "AWS::RDS::DBInstance": Naming("DBInstanceIdentifier", 63, lower=True),
    # ``traingrid-TrainingRunStack-1RX3CQ2V0T4OA``: no property names a nested stack.
    "AWS::CloudFormation::Stack": Naming("", 128, suffix=13),
}


def _named(previous: Callable[..., Any]) -> Callable[..., Any]:
    def parse_resource_and_generate_name(logical_id: str, resource_json: dict[str, Any],
                                         resources_map: ResourceMap) -> Any:
        parsed = previous(logical_id, resource_json, resources_map)
        naming = NAMING.get(resource_json.get("Type", ""))
        if parsed is None or naming is None:
            return parsed
        resource_class, cleaned, _moto_name = parsed
        given = cleaned.get("Properties", {}).get(naming.prop)
        name = given if given is not None else naming.generate(
            str(resources_map["AWS::StackName"]), logical_id)
        return resource_class, cleaned, name

    return parse_resource_and_generate_name


def _function_create(previous: Any) -> classmethod[Any, ..., Any]:
    create = original_function(previous)

    def function_create(cls, resource_name: str, cloudformation_json: dict[str, Any],  # noqa: ANN001
                        account_id: str, region_name: str, **kwargs: Any) -> LambdaFunction:
        fn = create(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
        if layers := cloudformation_json["Properties"].get("Layers"):
            fn.layers = fn._get_layers_data(layers)
        fn.logging_config = cloudformation_json["Properties"].get("LoggingConfig") or {}
        return fn

    return classmethod(function_create)


def _bucket_create(previous: Any) -> classmethod[Any, ..., Any]:
    create = original_function(previous)

    def bucket_create(cls, resource_name: str, cloudformation_json: dict[str, Any],  # noqa: ANN001
                      account_id: str, region_name: str, **kwargs: Any) -> FakeBucket:
        bucket = create(cls, resource_name, cloudformation_json, account_id, region_name,
                        **kwargs)
        notification = cloudformation_json["Properties"].get("NotificationConfiguration", {})
        enabled = notification.get("EventBridgeConfiguration", {}).get("EventBridgeEnabled")
        if str(enabled).lower() == "true":
            bucket.set_notification_configuration({"EventBridgeConfiguration": {}})
        return bucket

    return classmethod(bucket_create)


def _job_definition_create(cls, resource_name: str, cloudformation_json: dict[str, Any],  # noqa: ANN001
                           account_id: str, region_name: str, **kwargs: Any) -> JobDefinition:
    props = cloudformation_json["Properties"]

    def lowered(name: str) -> Any:
        return lowercase_first_key(props[name]) if name in props else None

    return batch_backends[account_id][region_name].register_job_definition(
        def_name=props.get("JobDefinitionName", resource_name),
        parameters=props.get("Parameters", {}),
        _type=props.get("Type", "container"),
        tags=props.get("Tags", {}),
        retry_strategy=lowered("RetryStrategy"),
        container_properties=lowered("ContainerProperties"),
        node_properties=lowered("NodeProperties"),
        eks_properties=lowered("EksProperties"),
        timeout=lowered("Timeout") or {},
        platform_capabilities=props.get("PlatformCapabilities"),
        propagate_tags=props.get("PropagateTags"),
    )


def _batch_service_linked_role(account_id: str) -> str:
    iam = iam_backends[account_id]["global"]
    for role in iam.roles.values():
        if role.path == "/aws-service-role/batch.amazonaws.com/":
            return role.arn
    return iam.create_service_linked_role("batch.amazonaws.com", "AWS Batch", "").arn


def _compute_environment_create(cls, resource_name: str, cloudformation_json: dict[str, Any],  # noqa: ANN001
                                account_id: str, region_name: str,
                                **kwargs: Any) -> ComputeEnvironment:
    props = cloudformation_json["Properties"]
    # Without SecurityGroupIds: its launch templates' (batch_environments).
    resources = lowercase_first_key(props["ComputeResources"])
    environment = batch_backends[account_id][region_name].create_compute_environment(
        props.get("ComputeEnvironmentName", resource_name),
        props["Type"],
        props.get("State", "ENABLED"),
        resources,
        props.get("ServiceRole") or _batch_service_linked_role(account_id),
    )
    if "EksConfiguration" in props:  # of type EKS: the user's cluster (batch_pods)
        batch_pods.attach_eks_configuration(
            environment, lowercase_first_key(props["EksConfiguration"]), account_id,
            region_name)
    return environment


def _clean_json(previous: Callable[..., Any]) -> Callable[..., Any]:
    def clean_json(resource_json: Any, resources_map: ResourceMap) -> Any:
        cleaned = previous(resource_json, resources_map)
        if isinstance(resource_json, list) and isinstance(cleaned, list):
            return [item for item in cleaned if item is not None]
        return cleaned

    return clean_json


def _load_parameters(previous: Callable[..., None]) -> Callable[..., None]:
    def load_parameters(self: ResourceMap) -> None:
        previous(self)
        for name, slot in self._template.get("Parameters", {}).items():
            value, kind = self.resolved_parameters.get(name), slot.get("Type", "String")
            if name in self.input_parameters or not isinstance(value, str | int | float):
                continue
            if kind == "CommaDelimitedList" or kind.startswith("List<"):
                value = str(value).split(",") if value != "" else []
            elif kind == "Number":
                number = float(value)
                value = int(number) if number.is_integer() else number
            self.resolved_parameters[name] = value
            self._parsed_resources[name] = value

    return load_parameters


def _parameter_list(previous: Any) -> property:
    def parameter_list(self: FakeStack) -> list[dict[str, Any]]:
        return [p | {"ParameterValue": ",".join(map(str, p["ParameterValue"]))}
                if isinstance(p["ParameterValue"], list) else p
                for p in previous.fget(self)]

    return property(parameter_list)


def _parse_template(previous: Callable[[str], dict[str, Any]]) -> Callable[[str], dict[str, Any]]:
    def parse_template(template: str) -> dict[str, Any]:
        if template.lstrip().startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                parsed: dict[str, Any] = json.loads(template)
                return parsed
        return previous(template)

    return parse_template


def _stack_output(self: FakeStack, attribute: str) -> Any:
    """``!GetAtt <Nested>.Outputs.<Name>``: the nested stack's output."""
    name = attribute.removeprefix("Outputs.")
    output = self.output_map[name] if name in self.output_map.outputs else None
    if name == attribute or output is None:
        raise parsing.ValidationError(
            message=f"Template error: stack {self.name} has no output {name!r}")
    return output.value


def _nested_stack_create(previous: Any) -> classmethod[Any, ..., Any]:
    create = original_function(previous)

    def nested_stack_create(cls, resource_name: str, cloudformation_json: dict[str, Any],  # noqa: ANN001
                            account_id: str, region_name: str, **kwargs: Any) -> FakeStack:
        passed = cloudformation_json["Properties"].get("Parameters", {})
        if lists := sorted(k for k, v in passed.items() if isinstance(v, list)):
            raise parsing.ValidationError(message=(
                f"Template error: nested stack {resource_name}: the values of {', '.join(lists)} "
                "are lists; a nested stack's parameters take strings (Fn::Join a list)"))
        stringly = {k: str(v) for k, v in passed.items()}
        json_ = cloudformation_json | {"Properties": cloudformation_json["Properties"]
                                       | {"Parameters": stringly}}
        return create(cls, resource_name, json_, account_id, region_name, **kwargs)

    return classmethod(nested_stack_create)


def apply() -> None:
    PATCHES.wrap(FakeStack, "parse_template",
                 lambda previous: staticmethod(_parse_template(original_function(previous))))
    PATCHES.wrap(parsing, "parse_resource_and_generate_name", _named)
    PATCHES.wrap(parsing, "clean_json", _clean_json)
    PATCHES.wrap(LambdaFunction, "create_from_cloudformation_json", _function_create)
    PATCHES.add(LayerVersion, "physical_resource_id", property(lambda self: self.arn))
    PATCHES.wrap(FakeBucket, "create_from_cloudformation_json", _bucket_create)
    PATCHES.replace(JobDefinition, "create_from_cloudformation_json",
                    classmethod(_job_definition_create))
    PATCHES.replace(ComputeEnvironment, "create_from_cloudformation_json",
                    classmethod(_compute_environment_create))
    PATCHES.wrap(ResourceMap, "load_parameters", _load_parameters)
    PATCHES.wrap(FakeStack, "parameter_list", _parameter_list)
    PATCHES.add(FakeStack, "get_cfn_attribute", _stack_output)
    PATCHES.wrap(FakeStack, "create_from_cloudformation_json", _nested_stack_create)
