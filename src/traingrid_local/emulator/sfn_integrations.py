"""Adaptation (moto 5.2.5): service integrations translate parameters and results like AWS.

Step Functions takes PascalCase parameters even where the service API is camelCase (Batch:
``JobName`` → ``jobName``) and returns PascalCase results. moto's interpreter leaves
``StateTaskService._normalise_parameters``/``_normalise_response`` empty, so ``batch:submitJob``
fails. This fills them in from botocore's operation models, and names aws-sdk errors with the
service's PascalCase name (``FSx.ThrottlingException``), as AWS does, and returns timestamps as
ISO 8601 strings (boto3's ``datetime`` values cannot be serialised into the state).
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

import botocore.session
from botocore import xform_name
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service_aws_sdk,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (  # noqa: E501
    StateTaskService,
)

from traingrid_local.emulator.patching import PATCHES


@functools.cache
def _operation_model(service: str, snake_action: str) -> Any:
    model = botocore.session.get_session().get_service_model(service)
    for name in model.operation_names:
        if xform_name(name) == snake_action:
            return model.operation_model(name)
    return None


def _operation(task: StateTaskService, service: str | None, action: str | None) -> Any:
    return _operation_model(
        task._get_boto_service_name(service), task._get_boto_service_action(action)
    )


def _normalise_parameters(self: StateTaskService, parameters: dict, boto_service_name=None,  # noqa: ANN001
                          service_action_name=None) -> None:
    operation = _operation(self, boto_service_name, service_action_name)
    if operation is not None and operation.input_shape is not None:
        self._to_boto_request(parameters, operation.input_shape)


def timestamps_as_text(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = timestamps_as_text(item)
    elif isinstance(value, list):
        value[:] = [timestamps_as_text(item) for item in value]
    return value


def _normalise_response(self: StateTaskService, response: Any, boto_service_name=None,  # noqa: ANN001
                        service_action_name=None) -> None:
    operation = _operation(self, boto_service_name, service_action_name)
    if operation is not None and operation.output_shape is not None:
        self._from_boto_response(response, operation.output_shape)
    timestamps_as_text(response)


SERVICE_ERROR_NAMES = {"batch": "Batch", "fsx": "FSx", "s3": "S3", "lambda": "Lambda",
                       "sagemaker": "SageMaker"}


def apply() -> None:
    PATCHES.replace(StateTaskService, "_normalise_parameters", _normalise_parameters)
    PATCHES.replace(StateTaskService, "_normalise_response", _normalise_response)
    PATCHES.update(state_task_service_aws_sdk._SERVICE_ERROR_NAMES, SERVICE_ERROR_NAMES,
                   "the aws-sdk integration's service error names")
