"""Names of runs: readable, valid everywhere a run's name goes, and deterministic.

Every execution TrainGrid starts is named ``<subject>-<yyyymmddTHHMM>-<hash>``: what it trains
(the dataset's last two prefix segments, or the campaign), when (UTC, to the minute), and a
hash of what identifies the request. The same request always maps to the same name, and Step
Functions refuses a second execution of one name, so a repeated trigger never starts a second
run.

A run started by an S3 upload is named from the object: its time is the object's
``LastModified`` (read with the manifest itself, never the event's time, which a redelivery
changes) and its hash covers bucket, key and ETag. A redelivered event, or the same manifest
uploaded again within the same minute, maps to the same name.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime, timedelta

# Step Functions execution names: ≤ 80 chars. Batch job names: ≤ 128 of [A-Za-z0-9_-].
MAX_NAME = 80
HASH_CHARS = 12
TIMESTAMP_FORMAT = "%Y%m%dT%H%M"
TIMESTAMP_CHARS = len("20261121T1300")
# "<subject>-<timestamp>-<hash>"
MAX_SUBJECT = MAX_NAME - TIMESTAMP_CHARS - HASH_CHARS - 2
_NOT_NAME_CHAR = re.compile(r"[^a-z0-9]+")


def slug(text: str, max_length: int) -> str:
    """Lower-case letters and digits separated by single hyphens, at most ``max_length``."""
    cleaned = _NOT_NAME_CHAR.sub("-", text.lower()).strip("-")
    return cleaned[:max_length].rstrip("-") or "run"


def digest(*parts: str) -> str:
    joined = "\n".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.sha256(joined).hexdigest()[:HASH_CHARS]


def window_start(moment: datetime, minutes: int) -> datetime:
    """The start of the ``minutes``-long window (counted from midnight UTC) holding ``moment``."""
    moment = moment.astimezone(UTC).replace(second=0, microsecond=0)
    midnight = moment.replace(hour=0, minute=0)
    return moment - (moment - midnight) % timedelta(minutes=minutes)


def execution_name(subject: str, moment: datetime, *identity: str) -> str:
    """``<slug of subject>-<yyyymmddTHHMM of moment, UTC>-<hash of identity and moment>``.

    For example ``imagenet2012-resized-20261121T1300-57b1caf1bd02``.
    """
    minute = moment.astimezone(UTC).strftime(TIMESTAMP_FORMAT)
    return f"{slug(subject, MAX_SUBJECT)}-{minute}-{digest(*identity, minute)}"


def fanout_name(campaign: str, moment: datetime, window_minutes: int,
                source: str = "marker") -> str:
    """``<campaign>-<yyyymmddTHHMM>-<hash>`` of the window holding ``moment``: what one source
    (markers, the schedule) starts for a campaign within one window is one run. Sources get
    different names, so a scheduled fan-out never collides with a marker's."""
    return execution_name(campaign, window_start(moment, window_minutes), source, campaign)


def prefix_of(key: str) -> str:
    """The prefix a manifest stands for: everything up to its last '/' (with the slash)."""
    return key.rpartition("/")[0] + "/" if "/" in key else ""


def dataset_subject(bucket: str, prefix: str) -> str:
    """What a run over ``s3://bucket/prefix`` is called: the prefix's last two segments."""
    segments = [s for s in prefix.split("/") if s][-2:]
    return "-".join(segments) or bucket


def run_name_for_object(bucket: str, key: str, etag: str, last_modified: datetime) -> str:
    """The run a manifest object asks for: ``<prefix>-<its LastModified>-<hash>``."""
    etag = etag.strip('"')  # S3 events omit the quotes that GetObject includes
    return execution_name(dataset_subject(bucket, prefix_of(key)), last_modified,
                          "s3", bucket, key, etag)


MAX_EXECUTION_NAME = 80  # StartExecution's name: 1-80 characters


def branch_name(execution_name: str, region: str) -> str:
    """The child execution of a fan-out's branch for the data in ``region``: the fan-out's
    name and the region, unique per fan-out and region, within StartExecution's 80
    characters (a long campaign's name is cut, a digest of the whole keeps it unique)."""
    suffix = f"-{region}"
    if len(execution_name) + len(suffix) <= MAX_EXECUTION_NAME:
        return execution_name + suffix
    digest = hashlib.sha256(execution_name.encode()).hexdigest()[:8]
    keep = MAX_EXECUTION_NAME - len(suffix) - len(digest) - 1
    return f"{execution_name[:keep].rstrip('-')}-{digest}{suffix}"


# SageMaker training jobs: ≤ 63 characters of [a-zA-Z0-9-], starting and ending alphanumeric.
MAX_JOB_NAME = 63
_NOT_JOB_NAME = re.compile(r"[^a-zA-Z0-9-]+")


def short_region(region: str) -> str:
    """``eu-central-1`` → ``euc1``."""
    geo, area, number = region.split("-", 2)
    return f"{geo}{area[0]}{number.split('-')[-1]}"


def job_name(execution_name: str, region: str, attempt: int) -> str:
    """Unique per execution, data region (one branch each) and attempt, wherever the job
    trains; readable; within SageMaker's limits."""
    suffix = f"-{short_region(region)}-{attempt}"
    base = _NOT_JOB_NAME.sub("-", execution_name).strip("-") or "traingrid"
    if len(base) + len(suffix) > MAX_JOB_NAME:
        digest = hashlib.sha256(execution_name.encode()).hexdigest()[:8]
        base = base[: MAX_JOB_NAME - len(suffix) - len(digest) - 1].rstrip("-") + "-" + digest
    return re.sub("-{2,}", "-", base + suffix)
