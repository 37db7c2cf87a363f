"""The IAM actions that authorise AWS API operations, and what a role's policy allows.

Operations are named ``prefix:Operation`` with the service's IAM prefix (botocore's signing
name: ``states``, not ``stepfunctions``) and the API's own operation name.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatch
from typing import Any

# Operations authorised by actions of other names (or by more than one action).
ACTIONS_OF_OPERATION = {
    "s3:ListObjectsV2": ("s3:ListBucket",),
    "s3:HeadObject": ("s3:GetObject",),
    "s3:CopyObject": ("s3:GetObject", "s3:PutObject"),
    # Multipart uploads are authorised as the object's PutObject; a part copy reads its source.
    "s3:CreateMultipartUpload": ("s3:PutObject",),
    "s3:UploadPartCopy": ("s3:GetObject", "s3:PutObject"),
    "s3:CompleteMultipartUpload": ("s3:PutObject",),
    "s3:ListParts": ("s3:ListMultipartUploadParts",),
}

# Actions AWS checks as well when an operation is given a parameter (the dependent actions of
# the Service Authorization Reference).
_FSX_NETWORK = ("ec2:DescribeSubnets", "ec2:DescribeVpcs", "ec2:CreateNetworkInterface",
                "ec2:DescribeNetworkInterfaces")
ACTIONS_OF_PARAMETER: dict[str, dict[str, tuple[str, ...]]] = {
    "s3:GetObject": {"VersionId": ("s3:GetObjectVersion",)},
    "sagemaker:CreateTrainingJob": {
        "RoleArn": ("iam:PassRole",),
        "Tags": ("sagemaker:AddTags",),
    },
    "batch:SubmitJob": {"Tags": ("batch:TagResource",)},
    "fsx:CreateFileSystem": {
        "Tags": ("fsx:TagResource",),
        "SubnetIds": _FSX_NETWORK,
        "SecurityGroupIds": ("ec2:DescribeSecurityGroups",),
        # A Lustre file system linked to S3: FSx creates its data-repository service-linked
        # role as the caller, and checks that the caller may read and write the bucket.
        "LustreConfiguration": (
            "iam:CreateServiceLinkedRole", "iam:AttachRolePolicy", "iam:PutRolePolicy",
            "s3:GetBucketLocation", "s3:ListBucket", "s3:GetObject", "s3:PutObject",
        ),
    },
}

# A state machine that logs to CloudWatch Logs sets up the delivery with its own role; none
# of these actions has a resource scope.
LOG_DELIVERY_ACTIONS = (
    "logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
)


def actions_of(operation: str, parameters: Iterable[str] | None = ()) -> set[str]:
    """The actions a call of ``operation`` needs. ``parameters`` are the names it passes;
    None when they cannot be known, which counts every parameter-dependent action."""
    actions = set(ACTIONS_OF_OPERATION.get(operation, (operation,)))
    dependent = ACTIONS_OF_PARAMETER.get(operation, {})
    given = dependent if parameters is None else set(parameters) & set(dependent)
    for name in given:
        actions.update(dependent[name])
    return actions


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statements(resource: dict[str, Any]) -> list[dict[str, Any]]:
    """The Allow statements of a role's inline policies (or of an ``AWS::IAM::Policy``)."""
    properties = resource["Properties"]
    documents = [p["PolicyDocument"] for p in properties.get("Policies", [])]
    documents += [properties["PolicyDocument"]] if "PolicyDocument" in properties else []
    return [s for document in documents for s in as_list(document["Statement"])
            if s["Effect"] == "Allow"]


def with_attached(template: dict[str, Any], role: str) -> dict[str, Any]:
    """The role ``role`` (a logical id) with the ``AWS::IAM::Policy`` resources that attach
    to it among its inline policies: what the role may do, however the template splits it."""
    resource = template["Resources"][role]
    attached = [{"PolicyName": r["Properties"]["PolicyName"],
                 "PolicyDocument": r["Properties"]["PolicyDocument"]}
                for r in template["Resources"].values()
                if r["Type"] == "AWS::IAM::Policy"
                and {"Ref": role} in as_list(r["Properties"].get("Roles", []))]
    properties = resource["Properties"]
    return {**resource, "Properties": {
        **properties, "Policies": [*properties.get("Policies", []), *attached]}}


def granted(role: dict[str, Any]) -> set[str]:
    """Every action (or action pattern) a role's inline policies allow."""
    return {a for s in statements(role) for a in as_list(s["Action"])}


def allows(patterns: Iterable[str], action: str) -> bool:
    return any(fnmatch(action, pattern) for pattern in patterns)
