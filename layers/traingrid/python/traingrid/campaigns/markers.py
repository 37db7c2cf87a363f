"""``campaigns/<campaign>/<region>/_READY`` in a campaign bucket marks a dataset as complete."""

from __future__ import annotations

import re
from dataclasses import dataclass

from traingrid.errors import RequestInvalid

MARKER_NAME = "_READY"
CAMPAIGN_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,47}$")
REGION_PATTERN = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")


@dataclass(frozen=True)
class Marker:
    bucket: str
    key: str
    campaign: str
    region: str

    @property
    def prefix(self) -> str:
        return self.key.removesuffix(MARKER_NAME)

    @property
    def s3_uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def parse_marker(bucket: str, key: str, event_region: str) -> Marker:
    """The dataset a marker stands for; every problem with its key at once."""
    parts = key.split("/")
    problems = []
    if len(parts) != 4 or parts[0] != "campaigns" or parts[3] != MARKER_NAME:
        problems.append(f"expected campaigns/<campaign>/<region>/{MARKER_NAME}, got {key!r}")
    else:
        campaign, region = parts[1], parts[2]
        if not CAMPAIGN_PATTERN.fullmatch(campaign):
            problems.append(f"campaign {campaign!r} must be 1-48 lower-case letters, digits "
                            "or '-'")
        if not REGION_PATTERN.fullmatch(region):
            problems.append(f"{region!r} is not an AWS region code")
        elif region != event_region:
            problems.append(f"the marker names {region} but its bucket is in {event_region}: "
                            "campaign data lands in a bucket of its own region")
    if problems:
        raise RequestInvalid([{"pointer": "/key", "message": p} for p in problems],
                             f"marker s3://{bucket}/{key}")
    return Marker(bucket, key, parts[1], parts[2])
