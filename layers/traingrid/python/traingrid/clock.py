"""The current time, in one place, so every timestamp TrainGrid writes comes from the same clock."""

from __future__ import annotations

import re
from datetime import UTC, datetime

# RFC 3339's date-time (OpenAPI's ``format: date-time``), as schema/openapi.yaml states it.
RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
                     r"([Zz]|[+-][0-9]{2}:[0-9]{2})")
RFC3339_EXAMPLE = "2026-11-01T00:00:00Z"


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


def parse_rfc3339(text: str) -> datetime:
    """A time a request names: an RFC 3339 date-time with its offset (no bare date, no epoch
    seconds, no time without a zone) that exists, in UTC too. ValueError saying which not."""
    if not RFC3339.fullmatch(text):
        raise ValueError(f"must be an RFC 3339 date-time with its offset, e.g. "
                         f"{RFC3339_EXAMPLE}")
    try:
        moment = datetime.fromisoformat(text.upper())
    except ValueError as error:  # 2026-02-30, a leap second, an offset of 24 hours or more
        raise ValueError(f"is not a time that exists ({error})") from None
    try:
        moment.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:59:59-23:59 is in the year 10000 in UTC
        raise ValueError("is outside the years 1 to 9999 in UTC") from None
    return moment


def request_time(value: object) -> object:
    """``parse_rfc3339`` as a model's before-validator: text parsed, anything else as it is
    (the field's own type refuses it)."""
    return parse_rfc3339(value) if isinstance(value, str) else value


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
