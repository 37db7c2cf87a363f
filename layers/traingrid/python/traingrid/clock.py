"""The current time, in one place, so every timestamp TrainGrid writes comes from the same clock."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text: str, *, assume_utc: bool = False) -> datetime:
    """An ISO 8601 time as AWS and TrainGrid write it (``2026-11-21T12:24:00Z`` or with an
    offset). A time without a zone is UTC if ``assume_utc``, else a ValueError."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        if not assume_utc:
            raise ValueError(f"{text!r} has no time zone")
        moment = moment.replace(tzinfo=UTC)
    return moment


def parse(text: str | None) -> datetime | None:
    """An optional time of TrainGrid's own state (``started_at``…): None when absent."""
    return parse_iso(text, assume_utc=True) if text else None


def service_now() -> datetime:
    """The wall clock: the time AWS services stamp on what they report (execution start times,
    S3 LastModified). The emulator simulates ``now`` for TrainGrid's own timestamps, but not
    the services' stamps, and what is compared with those must come from this clock."""
    return datetime.now(UTC)


def service_seconds(start: datetime, end: datetime) -> float:
    """Seconds between two of the services' stamps (execution history events). The emulator,
    whose services stamp real time while its clock runs faster, measures them on its clock."""
    return (end - start).total_seconds()
