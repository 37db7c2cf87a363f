"""The current time, in one place, so every timestamp TrainGrid writes comes from the same clock."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(text: str | None) -> datetime | None:
    """An ISO 8601 time as Step Functions and TrainGrid write it (``…Z`` or an offset)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def service_now() -> datetime:
    """The wall clock: the time AWS services stamp on what they report (execution start times,
    S3 LastModified). The emulator simulates ``now`` for TrainGrid's own timestamps, but not
    the services' stamps, and what is compared with those must come from this clock."""
    return datetime.now(UTC)
