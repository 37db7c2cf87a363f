"""Names of runs: readable, valid everywhere a run's name goes, and deterministic.

A run started by an S3 upload is named from the object (bucket, key, ETag), so an event that is
delivered twice, or the same manifest uploaded again, maps to the same Step Functions execution
name and can never start a second run.
"""

from __future__ import annotations

import hashlib
import re

# Step Functions execution names: ≤ 80 chars. Batch job names: ≤ 128 of [A-Za-z0-9_-].
MAX_NAME = 80
HASH_CHARS = 12
_NOT_NAME_CHAR = re.compile(r"[^a-z0-9]+")


def slug(text: str, max_length: int) -> str:
    """Lower-case letters and digits separated by single hyphens, at most ``max_length``."""
    cleaned = _NOT_NAME_CHAR.sub("-", text.lower()).strip("-")
    return cleaned[:max_length].rstrip("-") or "run"


def digest(*parts: str) -> str:
    joined = "\n".join(parts).encode("utf-8", "surrogatepass")
    return hashlib.sha256(joined).hexdigest()[:HASH_CHARS]


def prefix_of(key: str) -> str:
    """The prefix a manifest stands for: everything up to its last '/' (with the slash)."""
    return key.rpartition("/")[0] + "/" if "/" in key else ""


def run_name_for_object(bucket: str, key: str, etag: str) -> str:
    """``<last two prefix segments>-<hash of bucket, key and ETag>``.

    For example ``imagenet2012-resized-57b1caf1bd02``.
    """
    segments = [s for s in prefix_of(key).split("/") if s][-2:]
    readable = slug("-".join(segments) or bucket, MAX_NAME - HASH_CHARS - 1)
    etag = etag.strip('"')  # S3 events omit the quotes that HeadObject includes
    return f"{readable}-{digest(bucket, key, etag)}"
