"""Check what TrainGrid sends AWS Batch for an EKS-backed job without a cluster: against
botocore's Batch service model (the request shapes), and the pod Batch makes of it against
the Kubernetes pod schema (the ``kubernetes`` client's models, its OpenAPI types).

- ``render(parameters, state_input)``: an ASL ``Parameters`` block resolved as Step Functions
  resolves it (``"key.$": "$.path"``, ``$$.Execution.Id``).
- ``to_api(value, shape)``: a Step Functions aws-sdk or CloudFormation (PascalCase) request as
  the API's own (camelCase) members, map keys untouched, as both services convert it.
- ``batch_problems(operation, params)``: botocore's ParamValidator's report ("" when valid).
- ``pod_problems(pod)``: every key, type and quantity of a pod that the Kubernetes API would
  refuse (unknown fields too, which the API server's strict field validation refuses).
"""

from __future__ import annotations

import re
from typing import Any

import botocore.session
from botocore.model import ListShape, MapShape, Shape, StructureShape
from botocore.validate import ParamValidator

_BATCH = botocore.session.get_session().get_service_model("batch")


def render(parameters: Any, state_input: dict[str, Any],
           context: dict[str, Any] | None = None) -> Any:
    """An ASL Parameters template resolved against ``state_input`` (JSONPath ``$.a.b``)."""
    if isinstance(parameters, list):
        return [render(item, state_input, context) for item in parameters]
    if not isinstance(parameters, dict):
        return parameters
    out: dict[str, Any] = {}
    for key, value in parameters.items():
        if key.endswith(".$"):
            root = context or {} if value.startswith("$$.") else state_input
            out[key[:-2]] = _path(root, value.removeprefix("$$").removeprefix("$"))
        else:
            out[key] = render(value, state_input, context)
    return out


def _path(document: Any, path: str) -> Any:
    value = document
    for key in filter(None, path.split(".")):
        if not isinstance(value, dict) or key not in value:
            raise KeyError(f"{path}: no {key!r}")
        value = value[key]
    return value


def to_api(value: Any, shape: Shape) -> Any:
    """PascalCase members as the API's own names; a member the shape lacks raises."""
    if isinstance(shape, StructureShape):
        members = {name.lower(): name for name in shape.members}
        out = {}
        for key, item in value.items():
            name = members.get(key.lower())
            if name is None:
                raise KeyError(f"{shape.name} has no member {key!r}")
            out[name] = to_api(item, shape.members[name])
        return out
    if isinstance(shape, ListShape):
        return [to_api(item, shape.member) for item in value]
    if isinstance(shape, MapShape):
        return {key: to_api(item, shape.value) for key, item in value.items()}
    return value


def request_shape(operation: str) -> StructureShape:
    shape = _BATCH.operation_model(operation).input_shape
    assert isinstance(shape, StructureShape)
    return shape


def batch_problems(operation: str, params: dict[str, Any]) -> str:
    report = ParamValidator().validate(params, request_shape(operation))
    return report.generate_report() if report.has_errors() else ""


# --- the pod ------------------------------------------------------------------------------

# A Kubernetes quantity (resource.Quantity's serialised form).
QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?\d+))?$")
_PRIMITIVES: dict[str, type | tuple[type, ...]] = {
    "str": str, "int": int, "bool": bool, "float": (int, float), "object": object}


def pod_of(pod_properties: dict[str, Any]) -> dict[str, Any]:
    """The pod Batch makes of a node's ``podProperties`` (API member names): its metadata,
    and the rest as the pod's spec (Batch's names are Kubernetes' own)."""
    spec = {k: v for k, v in pod_properties.items() if k != "metadata"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": pod_properties.get("metadata", {}), "spec": spec}


def pod_problems(pod: dict[str, Any]) -> list[str]:
    from kubernetes.client import V1Pod

    problems = _check(pod, V1Pod, "pod")
    for container in pod.get("spec", {}).get("containers", []):
        for kind in ("limits", "requests"):
            for name, quantity in container.get("resources", {}).get(kind, {}).items():
                if not QUANTITY.match(str(quantity)):
                    problems.append(f"{container.get('name')}: {kind}.{name}={quantity!r}")
    for volume in pod.get("spec", {}).get("volumes", []):
        size = volume.get("emptyDir", {}).get("sizeLimit")
        if size is not None and not QUANTITY.match(str(size)):
            problems.append(f"volume {volume.get('name')}: sizeLimit={size!r}")
    return problems


def _check_named(value: Any, kind: str, path: str) -> list[str] | None:
    """A list, map or primitive type of the client's OpenAPI types; None for a model."""
    if kind.startswith("list["):
        if not isinstance(value, list):
            return [f"{path}: not a list"]
        return [p for i, item in enumerate(value)
                for p in _check(item, kind[5:-1], f"{path}[{i}]")]
    if kind.startswith("dict("):
        inner = kind[5:-1].split(", ", 1)[1]
        if not isinstance(value, dict):
            return [f"{path}: not a map"]
        return [p for k, item in value.items() for p in _check(item, inner, f"{path}.{k}")]
    if kind in _PRIMITIVES:
        ok = isinstance(value, _PRIMITIVES[kind]) and (
            kind in ("bool", "object") or not isinstance(value, bool))
        return [] if ok else [f"{path}: {value!r} is not {kind}"]
    return None


def _check(value: Any, kind: Any, path: str) -> list[str]:
    import kubernetes.client as models

    if isinstance(kind, str):
        found = _check_named(value, kind, path)
        if found is not None:
            return found
        kind = getattr(models, kind)
    if not isinstance(value, dict):
        return [f"{path}: not an object"]
    by_json = {json_name: attr for attr, json_name in kind.attribute_map.items()}
    problems = [f"{path}.{key}: no such field of {kind.__name__}" for key in value
                if key not in by_json]
    for key, item in value.items():
        if key in by_json:
            problems += _check(item, kind.openapi_types[by_json[key]], f"{path}.{key}")
    # Required fields: the model refuses None for them.
    try:
        kind(**{by_json[k]: v for k, v in value.items() if k in by_json})
    except ValueError as refused:
        problems.append(f"{path}: {refused}")
    return problems
