"""Hold a function's recorded AWS calls against its role in the deployed template."""

from __future__ import annotations

from fnmatch import fnmatch

from traingrid_local.emulator.deploy import Stack

# Operations authorised by actions of other names.
ACTIONS_OF_OPERATION = {
    "s3:ListObjectsV2": ("s3:ListBucket",),
    "s3:HeadObject": ("s3:GetObject",),
    "s3:CopyObject": ("s3:GetObject", "s3:PutObject"),
}


def role_actions(stack: Stack, function_name: str) -> list[str]:
    logical = next(k for k, v in stack.resources.items() if v == function_name)
    role = stack.template["Resources"][f"{logical}Role"]["Properties"]
    return [a for policy in role.get("Policies", [])
            for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"
            for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]


def missing_permissions(stack: Stack, calls: dict[str, set[str]]) -> list[str]:
    """``function: action`` for every recorded call that the function's role does not allow."""
    missing = []
    for function_name, operations in calls.items():
        allowed = role_actions(stack, function_name)
        for operation in sorted(operations):
            for action in ACTIONS_OF_OPERATION.get(operation, (operation,)):
                if not any(fnmatch(action, pattern) for pattern in allowed):
                    missing.append(f"{function_name}: {action}")
    return missing
