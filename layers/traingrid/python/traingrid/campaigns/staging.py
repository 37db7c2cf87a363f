"""Staging a region's data where its job trains, at any size: which call copies each object and
how a large one is cut into parts. Pure; ``steps.stage_input`` does the copying.

CopyObject refuses a source over 5 GiB, so a larger object is copied as a multipart upload of
server-side part copies (UploadPartCopy), at most 10,000 parts of 512 MiB or more. The staging
is resumable between calls at the granularity of an object, and of a part within a large one:
its state (``Staging``) names the last object copied and the multipart upload in progress, so
a campaign of many terabytes is copied by as many bounded calls as it takes, each well inside a
Lambda's time limit.
"""

from __future__ import annotations

import math

# The staging's state (and its Upload) as the execution carries it: RegionJob's ``staging``.
from traingrid.vocabulary.campaign_fanout import Staging

GIB = 1024**3
COPY_OBJECT_LIMIT = 5 * GIB  # the largest source CopyObject takes
MIN_PART = 512 * 1024**2
MAX_PART = 5 * GIB
MAX_PARTS = 10_000


def part_size(size: int) -> int:
    """Parts of at least 512 MiB, few enough for S3's 10,000, none over 5 GiB."""
    needed = max(MIN_PART, math.ceil(size / MAX_PARTS))
    if needed > MAX_PART:
        raise ValueError(f"an object of {size} bytes is larger than S3 can hold (5 TiB)")
    return needed


def part_count(size: int) -> int:
    return max(1, math.ceil(size / part_size(size)))


def part_range(size: int, part: int) -> str:
    """The CopySourceRange of a 1-based part: ``bytes=first-last``."""
    step = part_size(size)
    first = (part - 1) * step
    return f"bytes={first}-{min(size, first + step) - 1}"


def needs_multipart(size: int) -> bool:
    return size > COPY_OBJECT_LIMIT


def started(region: str, target: str) -> Staging:
    return Staging(region=region, target=target, after="", objects=0, bytes=0, calls=0,
                   done=False, upload=None)
