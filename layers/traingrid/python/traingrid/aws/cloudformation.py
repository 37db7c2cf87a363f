"""Answering CloudFormation for a custom resource (its pre-signed response URL)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def respond(event: dict[str, Any], status: str, reason: str, physical_id: str,
            data: dict[str, str] | None = None) -> None:
    body = json.dumps({
        "Status": status, "Reason": reason[:1000], "PhysicalResourceId": physical_id,
        "StackId": event["StackId"], "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"], "Data": data or {},
    }).encode()
    request = urllib.request.Request(  # noqa: S310 - CloudFormation's pre-signed https URL
        event["ResponseURL"], data=body, method="PUT",
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(request, timeout=30):  # noqa: S310
        pass
