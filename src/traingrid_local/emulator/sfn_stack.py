"""Adaptation (moto 5.2.5): state machines created by a CloudFormation stack are the ones the
Step Functions API serves and executes, with their DefinitionSubstitutions applied.

With ``execute_state_machine`` on, moto's API serves the ASL-interpreting "parser" backend, but
its CloudFormation resource still creates state machines in the plain backend, and reads only
``DefinitionString``. This routes creation to the backend the API serves, reads the definition
from ``DefinitionS3Location`` (where ``sam package`` puts it) or ``DefinitionString``, and
substitutes ``${Name}`` placeholders the way CloudFormation does.
"""

from __future__ import annotations

import re
from typing import Any

from moto.s3.models import s3_backends
from moto.stepfunctions.models import StateMachine
from moto.stepfunctions.responses import get_backend
from moto.stepfunctions.utils import cfn_to_api_tags

from traingrid_local.emulator.patching import PATCHES

PLACEHOLDER = re.compile(r"\$\{([^}!]+)\}")


def substitute(definition: str, substitutions: dict[str, Any]) -> str:
    """Replace ``${Name}`` with its value; unknown names stay (CloudFormation fails on them
    at deploy time; our template tests check there are none)."""
    return PLACEHOLDER.sub(
        lambda m: str(substitutions.get(m.group(1), m.group(0))), definition
    )


def _definition(props: dict[str, Any], account_id: str) -> str:
    if "DefinitionS3Location" in props:
        location = props["DefinitionS3Location"]
        obj = s3_backends[account_id]["aws"].get_object(location["Bucket"], location["Key"])
        if obj is None:
            raise ValueError(f"DefinitionS3Location s3://{location['Bucket']}/"
                             f"{location['Key']} does not exist")
        return obj.value.decode()
    return props["DefinitionString"]


def _create(cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str,  # noqa: ANN001
            region_name: str, **kwargs: Any) -> Any:
    props = cloudformation_json["Properties"]
    definition = substitute(_definition(props, account_id),
                            props.get("DefinitionSubstitutions") or {})
    return get_backend(account_id, region_name).create_state_machine(
        props.get("StateMachineName", resource_name),
        definition,
        props.get("RoleArn", ""),
        tags=cfn_to_api_tags(props.get("Tags", [])),
        sm_type=props.get("StateMachineType"),
    )


def _delete(cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str,  # noqa: ANN001
            region_name: str) -> None:
    backend = get_backend(account_id, region_name)
    for machine in list(backend.state_machines):
        if machine.name == resource_name or machine.arn == resource_name:
            backend.delete_state_machine(machine.arn)


def apply() -> None:
    PATCHES.replace(StateMachine, "create_from_cloudformation_json", classmethod(_create))
    PATCHES.replace(StateMachine, "delete_from_cloudformation_json", classmethod(_delete))
