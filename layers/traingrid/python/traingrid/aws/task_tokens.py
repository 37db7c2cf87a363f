"""Task tokens of executions waiting for a job, in DynamoDB, keyed by the job's id.

An event about a job finds the execution waiting for it here. One item per job: a new wait
replaces the token of the previous one, and an item outlives its wait by at most a day (TTL).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from traingrid.aws.client_errors import NO_ANSWER, translated
from traingrid.aws.clients import client

TTL_MARGIN_S = 24 * 3600


@dataclass(frozen=True)
class ParkedWait:
    job_id: str
    token: str
    context: dict[str, Any]  # what the check needs besides the job: its plan, its limits


def park(table: str, job_id: str, token: str, context: dict[str, Any], now_s: float,
         wait_s: int) -> None:
    with translated("DynamoDB", "PutItem"):
        client("dynamodb").put_item(TableName=table, Item={
            "job_id": {"S": job_id},
            "token": {"S": token},
            "context": {"S": json.dumps(context, separators=(",", ":"))},
            "expires_at": {"N": str(int(now_s + wait_s + TTL_MARGIN_S))},
        })


def parked(table: str, job_id: str) -> ParkedWait | None:
    with translated("DynamoDB", "GetItem"):
        item = client("dynamodb").get_item(
            TableName=table, Key={"job_id": {"S": job_id}}, ConsistentRead=True,
        ).get("Item")
    if item is None:
        return None
    return _wait(item)


def all_parked(table: str) -> list[ParkedWait]:
    """Every wait parked now (a few per running job: the table holds only live waits)."""
    found: list[ParkedWait] = []
    with translated("DynamoDB", "Scan"):
        for page in client("dynamodb").get_paginator("scan").paginate(
                TableName=table, ConsistentRead=True):
            found += [_wait(item) for item in page["Items"]]
    return found


def _wait(item: dict[str, Any]) -> ParkedWait:
    return ParkedWait(item["job_id"]["S"], item["token"]["S"], json.loads(item["context"]["S"]))


def forget(table: str, job_id: str, token: str) -> None:
    """Remove the job's wait if it is still this token's (a newer wait stays)."""
    try:
        client("dynamodb").delete_item(
            TableName=table, Key={"job_id": {"S": job_id}},
            ConditionExpression="#token = :token",
            ExpressionAttributeNames={"#token": "token"},
            ExpressionAttributeValues={":token": {"S": token}},
        )
    except ClientError as error:
        if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return
        with translated("DynamoDB", "DeleteItem"):
            raise
    except NO_ANSWER:
        with translated("DynamoDB", "DeleteItem"):
            raise
