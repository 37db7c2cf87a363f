"""Adaptation (moto 5.2.5): Batch compute environments' security groups, as Batch takes them.

- Batch refuses a compute environment that names security groups (``securityGroupIds``) while
  its launch template, or one of its overrides, declares network interfaces: "Either compute
  environment Security Groups or Network Interfaces in Launch template are exclusively
  allowed" (Batch's ClientException to CreateComputeEnvironment, quoted in aws-cdk#21577; its
  API says why: "If security groups are specified using both securityGroupIds and
  launchTemplate, the values in securityGroupIds are used", ComputeResource.securityGroupIds).
  Here CreateComputeEnvironment and UpdateComputeEnvironment (the environment's resources with
  the update's) refuse it too, with that text.
- "One or more security groups must be specified, either in securityGroupIds or using a
  launch template referenced in launchTemplate": moto insists on ``securityGroupIds``, so an
  environment without them takes its launch templates' (their own, or their interfaces').
- Where those tasks then go, a VPC's default security group, has the rule AWS creates it with:
  "A default security group includes a default rule that grants instances unrestricted
  network access to each other" (EC2 API, CreateSecurityGroup); moto's has only its egress.
"""

from __future__ import annotations

from typing import Any

from moto.batch.exceptions import ClientException
from moto.batch.models import BatchBackend
from moto.ec2.models import ec2_backends
from moto.ec2.models.security_groups import SecurityGroup, SecurityGroupRule
from moto.moto_api._internal import mock_random

from traingrid_local.emulator.patching import PATCHES

# Environments that name no groups (moto's copy holds their launch templates').
_BORROWED: set[str] = set()
GROUPS_BESIDE_INTERFACES = ("Either compute environment Security Groups or Network Interfaces "
                            "in Launch template are exclusively allowed")


def _template_data(backend: BatchBackend, spec: dict[str, Any]) -> dict[str, Any]:
    """The launch template data ``spec`` (a launchTemplate or one of its overrides) names: its
    version when given, else its latest."""
    ec2 = ec2_backends[backend.account_id][backend.region_name]
    template_id = spec.get("launchTemplateId") or spec.get("LaunchTemplateId")
    name = spec.get("launchTemplateName") or spec.get("LaunchTemplateName")
    template = (ec2.get_launch_template(template_id) if template_id
                else ec2.get_launch_template_by_name(name) if name else None)
    if template is None:
        return {}
    version = str(spec.get("version") or spec.get("Version") or "")
    found = (template.get_version(version) if version.isdigit()
             else template.default_version() if version == "$Default"
             else template.latest_version())
    return dict(found.data or {})


def _templates(backend: BatchBackend, resources: dict[str, Any]) -> list[dict[str, Any]]:
    launch = resources.get("launchTemplate") or {}
    if not launch:
        return []
    return [_template_data(backend, launch),
            *(_template_data(backend, o) for o in launch.get("overrides") or [])]


def _groups(data: dict[str, Any]) -> list[str]:
    """The groups a launch template gives an instance: its own, else its interfaces'."""
    groups = list(data.get("SecurityGroupIds") or [])
    for interface in data.get("NetworkInterfaces") or []:
        groups += [g for g in interface.get("Groups") or [] if g not in groups]
    return groups


def refuse_groups_beside_interfaces(backend: BatchBackend, resources: dict[str, Any]) -> None:
    """Batch's refusal of ``securityGroupIds`` beside launch-template network interfaces."""
    if not resources.get("securityGroupIds"):
        return
    if any(data.get("NetworkInterfaces") for data in _templates(backend, resources)):
        raise ClientException(f"Error executing request, Exception : {GROUPS_BESIDE_INTERFACES}"
                              f", RequestId: {mock_random.uuid4()}")


def _create_compute_environment(previous: Any) -> Any:
    def create_compute_environment(self: BatchBackend, compute_environment_name: str,
                                   _type: str, state: str, compute_resources: dict[str, Any],
                                   *args: Any, **kwargs: Any) -> Any:
        borrowed = bool(compute_resources) and not compute_resources.get("securityGroupIds")
        if compute_resources:
            refuse_groups_beside_interfaces(self, compute_resources)
            if borrowed:
                compute_resources = {**compute_resources, "securityGroupIds": list(dict.fromkeys(
                    g for data in _templates(self, compute_resources) for g in _groups(data)))}
        environment = previous(self, compute_environment_name, _type, state,
                               compute_resources, *args, **kwargs)
        if borrowed:
            _BORROWED.add(environment.arn)
        return environment

    return create_compute_environment


def _update_compute_environment(previous: Any) -> Any:
    def update_compute_environment(self: BatchBackend, compute_environment_name: str,
                                   state: str | None, compute_resources: Any | None,
                                   service_role: str | None) -> Any:
        environment = self.get_compute_environment(compute_environment_name)
        if environment is not None and compute_resources:
            current = dict(environment.compute_resources)
            if environment.arn in _BORROWED:  # the environment itself names none
                current.pop("securityGroupIds", None)
            refuse_groups_beside_interfaces(self, {**current, **compute_resources})
        return previous(self, compute_environment_name, state, compute_resources,
                        service_role)

    return update_compute_environment


def _security_group_init(previous: Any) -> Any:
    def init(self: SecurityGroup, *args: Any, **kwargs: Any) -> None:
        previous(self, *args, **kwargs)
        if self.is_default and self.vpc_id:
            self.ingress_rules.append(SecurityGroupRule(
                self.ec2_backend, "-1", self.id, None, None, None,
                source_group={"GroupId": self.id, "UserId": self.owner_id}, is_egress=False))

    return init


def reset() -> None:
    _BORROWED.clear()


def apply() -> None:
    PATCHES.wrap(BatchBackend, "create_compute_environment", _create_compute_environment)
    PATCHES.wrap(BatchBackend, "update_compute_environment", _update_compute_environment)
    PATCHES.wrap(SecurityGroup, "__init__", _security_group_init)
