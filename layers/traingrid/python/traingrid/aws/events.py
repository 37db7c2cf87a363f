"""EventBridge: TrainGrid's own events on the account's default event bus.

PutEvents (botocore's ``events`` model, PutEventsRequestEntry): ``Source``, ``DetailType`` and
``Detail`` are required, or EventBridge fails the entry; ``DetailType`` is at most 128
characters; ``Detail`` is a JSON object; an entry is at most 256 KB and a request under 1 MB,
with at most 10 entries ("Calculating PutEvents event entry size", EventBridge User Guide).
PutEvents answers 200 even when entries fail: ``FailedEntryCount`` and each entry's
``ErrorCode`` say which. ``EventBusName`` left out is the default bus.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from traingrid.aws.client_errors import translated
from traingrid.aws.clients import client
from traingrid.errors import AwsServiceError

MAX_ENTRIES = 10
MAX_ENTRY_BYTES = 256 * 1024
MAX_DETAIL_TYPE = 128


def entry_size(source: str, detail_type: str, detail: str, resources: Sequence[str]) -> int:
    """An entry's size as the User Guide counts it: the time (14 bytes), then the UTF-8
    bytes of the source, detail type, detail and each resource."""
    return 14 + sum(len(text.encode()) for text in (source, detail_type, detail, *resources))


def put(source: str, detail_type: str, details: Sequence[tuple[dict[str, Any], list[str]]],
        at: datetime | None = None) -> int:
    """Publish one event per ``(detail, resources)`` on the default bus; how many were
    published. ValueError for an entry EventBridge would refuse; AwsServiceError naming the
    failed entries' codes."""
    if len(detail_type) > MAX_DETAIL_TYPE:
        raise ValueError(f"DetailType is longer than {MAX_DETAIL_TYPE} characters")
    entries = []
    for detail, resources in details:
        text = json.dumps(detail, separators=(",", ":"), sort_keys=True)
        if entry_size(source, detail_type, text, resources) > MAX_ENTRY_BYTES:
            raise ValueError(f"an event of {detail_type} is larger than 256 KB")
        entries.append({"Source": source, "DetailType": detail_type, "Detail": text,
                        "Resources": list(resources)} | ({"Time": at} if at else {}))
    sent = 0
    for first in range(0, len(entries), MAX_ENTRIES):
        batch = entries[first:first + MAX_ENTRIES]
        with translated("EventBridge", "PutEvents"):
            answer = client("events").put_events(Entries=batch)
        if answer.get("FailedEntryCount"):
            codes = sorted({e.get("ErrorCode", "?") for e in answer["Entries"]
                            if e.get("ErrorCode")})
            raise AwsServiceError("EventBridge", "PutEvents", ",".join(codes),
                                  f"{answer['FailedEntryCount']} of {len(batch)} entries "
                                  "failed")
        sent += len(batch)
    return sent
