"""CloudWatch Logs: the tail of a log stream."""

from __future__ import annotations

from traingrid.aws.client_errors import translated
from traingrid.aws.clients import client


def tail(group: str, stream: str, lines: int = 200) -> list[dict[str, object]]:
    """The last ``lines`` events of a stream, oldest first, as ``{timestamp, message}``
    (milliseconds since the epoch). ResourceNotFound if the stream does not exist."""
    with translated("CloudWatchLogs", "GetLogEvents"):
        events = client("logs").get_log_events(
            logGroupName=group, logStreamName=stream, limit=lines, startFromHead=False
        )["events"]
    return [{"timestamp": e["timestamp"], "message": e["message"]} for e in events]
