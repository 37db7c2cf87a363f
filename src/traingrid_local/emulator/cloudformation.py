"""Adaptation (moto 5.2.5): CloudFormation creates what our template declares, as AWS does.

- ``AWS::Lambda::Function`` keeps its ``Layers`` and ``LoggingConfig`` (moto drops them);
- ``AWS::Lambda::LayerVersion`` has a physical id, so ``Ref`` yields its ARN;
- ``AWS::S3::Bucket`` honours ``NotificationConfiguration.EventBridgeConfiguration``;
- ``AWS::Batch::JobDefinition`` keeps its type (``multinode``), node properties and optional
  retry strategy (moto forces ``container`` and requires a retry strategy);
- ``AWS::Batch::ComputeEnvironment`` without ``ServiceRole`` uses the Batch service-linked role,
  created on first use as AWS does (moto requires the property), and without
  ``SecurityGroupIds`` its launch template's (moto requires them on the environment);
- parameter defaults are typed like passed values (moto leaves a ``CommaDelimitedList`` default
  a string and a ``Number`` default text).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moto.awslambda.models import LambdaFunction, LayerVersion
from moto.batch.models import ComputeEnvironment, JobDefinition, batch_backends
from moto.batch.utils import lowercase_first_key
from moto.cloudformation.parsing import ResourceMap
from moto.ec2.models import ec2_backends
from moto.iam.models import iam_backends
from moto.s3.models import FakeBucket

from traingrid_local.emulator.patching import PATCHES, original_function


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


def _launch_template_groups(account_id: str, region_name: str,
                            spec: dict[str, Any]) -> list[str]:
    """The security groups a compute environment's instances get from its launch template."""
    template_id = spec.get("LaunchTemplateId") or spec.get("launchTemplateId")
    if not template_id:
        return []
    template = ec2_backends[account_id][region_name].get_launch_template(template_id)
    data = template.latest_version().data
    return list(data.get("SecurityGroupIds") or [])


def _compute_environment_create(cls, resource_name: str, cloudformation_json: dict[str, Any],  # noqa: ANN001
                                account_id: str, region_name: str,
                                **kwargs: Any) -> ComputeEnvironment:
    props = cloudformation_json["Properties"]
    resources = lowercase_first_key(props["ComputeResources"])
    if "securityGroupIds" not in resources:
        resources["securityGroupIds"] = _launch_template_groups(
            account_id, region_name, resources.get("launchTemplate") or {})
    return batch_backends[account_id][region_name].create_compute_environment(
        props.get("ComputeEnvironmentName", resource_name),
        props["Type"],
        props.get("State", "ENABLED"),
        resources,
        props.get("ServiceRole") or _batch_service_linked_role(account_id),
    )


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


def apply() -> None:
    PATCHES.wrap(LambdaFunction, "create_from_cloudformation_json", _function_create)
    PATCHES.add(LayerVersion, "physical_resource_id", property(lambda self: self.arn))
    PATCHES.wrap(FakeBucket, "create_from_cloudformation_json", _bucket_create)
    PATCHES.replace(JobDefinition, "create_from_cloudformation_json",
                    classmethod(_job_definition_create))
    PATCHES.replace(ComputeEnvironment, "create_from_cloudformation_json",
                    classmethod(_compute_environment_create))
    PATCHES.wrap(ResourceMap, "load_parameters", _load_parameters)
