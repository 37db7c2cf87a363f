"""Hold a function's recorded AWS calls against its role in the deployed template."""

from __future__ import annotations

from tests.iam_actions import actions_of, allows, granted
from traingrid_local.emulator.deploy import Stack


def role_actions(stack: Stack, function_name: str) -> set[str]:
    logical = next(k for k, v in stack.resources.items() if v == function_name)
    return granted(stack.template["Resources"][f"{logical}Role"])


def missing_permissions(stack: Stack, calls: dict[str, set[str]]) -> list[str]:
    """``function: action`` for every recorded call that the function's role does not allow."""
    missing = []
    for function_name, operations in calls.items():
        allowed = role_actions(stack, function_name)
        for operation in sorted(operations):
            for action in sorted(actions_of(operation)):
                if not allows(allowed, action):
                    missing.append(f"{function_name}: {action}")
    return missing
