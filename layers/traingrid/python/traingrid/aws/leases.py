"""Leases in DynamoDB: one holder at a time of a named lease, for as long as it says.

A holder takes the lease with a conditional write that succeeds only if no one holds it or the
last holder's time is up (a holder that crashed frees it when its time runs out), and gives it
back with a delete that succeeds only if it still holds it.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from traingrid.aws.client_errors import NO_ANSWER, translated
from traingrid.aws.clients import client

TAKEN = "ConditionalCheckFailedException"


def acquire(table: str, name: str, holder: str, now_s: float, hold_s: int) -> bool:
    """Take the lease ``name`` for ``hold_s`` seconds; False if another holder has it."""
    try:
        client("dynamodb").put_item(
            TableName=table,
            Item={"lease": {"S": name}, "holder": {"S": holder},
                  "expires_at": {"N": str(int(now_s + hold_s))}},
            ConditionExpression="attribute_not_exists(lease) OR expires_at < :now",
            ExpressionAttributeValues={":now": {"N": str(int(now_s))}},
        )
    except ClientError as error:
        if error.response["Error"]["Code"] == TAKEN:
            return False
        with translated("DynamoDB", "PutItem"):
            raise
    except NO_ANSWER:
        with translated("DynamoDB", "PutItem"):
            raise
    return True


def release(table: str, name: str, holder: str) -> None:
    """Give the lease back, if ``holder`` still has it (one whose time ran out may not)."""
    try:
        client("dynamodb").delete_item(
            TableName=table, Key={"lease": {"S": name}},
            ConditionExpression="holder = :holder",
            ExpressionAttributeValues={":holder": {"S": holder}},
        )
    except ClientError as error:
        if error.response["Error"]["Code"] == TAKEN:
            return
        with translated("DynamoDB", "DeleteItem"):
            raise
    except NO_ANSWER:
        with translated("DynamoDB", "DeleteItem"):
            raise
