"""Adaptation (moto 5.2.5): the API Gateway resources SAM generates stay out of the emulated
stack; ``traingrid serve`` stands in for API Gateway.

moto's CloudFormation creates the ``AWS::ApiGateway::RestApi`` without importing its ``Body``,
the OpenAPI document in which SAM declares every method with its IAM authorisation and its
Lambda integration. The ``Deployment`` SAM adds then fails ("The REST API doesn't contain any
methods") and takes the whole stack with it. moto's API Gateway would not run a Lambda proxy
integration anyway.

So :func:`without_api_gateway` takes out of the translated template every
``AWS::ApiGateway::*`` resource, whatever refers to one (the permissions that let API Gateway
invoke the function) and the outputs that name one, and reports what it took out. Everything
behind the API is deployed as it ships: the API function with its environment and role, and
the idempotency table. ``traingrid serve`` (:mod:`traingrid_local.api.server`) does what API
Gateway would: it turns HTTP requests into the REST proxy events API Gateway sends to that same
function. What it does not do: SigV4 authorisation (the template tests check that every method
requires it), throttling and access logs.
"""

from __future__ import annotations

import copy
import re
from typing import Any

LEFT_OUT_PREFIX = "AWS::ApiGateway::"
_SUB_NAME = re.compile(r"\$\{([A-Za-z0-9]+)(?:\.[A-Za-z0-9.]+)?\}")


def references(node: Any) -> set[str]:
    """Logical ids a template fragment refers to (Ref, Fn::GetAtt, Fn::Sub, DependsOn)."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= references(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                found.add(value)
            elif key == "Fn::GetAtt":
                found.add(value[0] if isinstance(value, list) else str(value).split(".")[0])
            elif key == "Fn::Sub":
                text, variables = (value, {}) if isinstance(value, str) else value
                found |= set(_SUB_NAME.findall(text)) - set(variables)
                found |= references(variables)
            elif key == "DependsOn":
                found |= {value} if isinstance(value, str) else set(value)
            else:
                found |= references(value)
    return found


def without_api_gateway(template: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The template without its API Gateway resources and what depends on them; and the
    logical ids (resources and outputs) left out."""
    adapted = copy.deepcopy(template)
    resources = adapted["Resources"]
    left_out = {k for k, r in resources.items() if r["Type"].startswith(LEFT_OUT_PREFIX)}
    while True:  # and whatever needs them, until nothing more does
        dependent = {k for k, r in resources.items()
                     if k not in left_out and references(_without_depends_on(r)) & left_out}
        if not dependent:
            break
        left_out |= dependent
    for logical_id in left_out:
        del resources[logical_id]
    for resource in resources.values():
        _forget_dependencies(resource, left_out)
    outputs = adapted.get("Outputs", {})
    dropped_outputs = {k for k, o in outputs.items() if references(o) & left_out}
    for key in dropped_outputs:
        del outputs[key]
    return adapted, sorted(left_out) + [f"Outputs.{k}" for k in sorted(dropped_outputs)]


def _without_depends_on(resource: dict[str, Any]) -> dict[str, Any]:
    """A resource that merely waits for a left-out one does not need it."""
    return {k: v for k, v in resource.items() if k != "DependsOn"}


def _forget_dependencies(resource: dict[str, Any], left_out: set[str]) -> None:
    depends_on = resource.get("DependsOn")
    if depends_on is None:
        return
    kept = [d for d in ([depends_on] if isinstance(depends_on, str) else depends_on)
            if d not in left_out]
    if kept:
        resource["DependsOn"] = kept
    else:
        del resource["DependsOn"]
