"""FSx's words for where a file system and a data repository task stand.

No client here, so that pure decisions (the hydrate and export loops, the janitor) can name
them without loading boto3.
"""

from __future__ import annotations

from enum import StrEnum


class FileSystemLifecycle(StrEnum):
    """DescribeFileSystems' ``Lifecycle``."""

    AVAILABLE = "AVAILABLE"
    CREATING = "CREATING"
    FAILED = "FAILED"
    DELETING = "DELETING"
    MISCONFIGURED = "MISCONFIGURED"
    MISCONFIGURED_UNAVAILABLE = "MISCONFIGURED_UNAVAILABLE"
    UPDATING = "UPDATING"


class TaskLifecycle(StrEnum):
    """DescribeDataRepositoryTasks' ``Lifecycle`` (an export's)."""

    PENDING = "PENDING"
    EXECUTING = "EXECUTING"
    FAILED = "FAILED"
    SUCCEEDED = "SUCCEEDED"
    CANCELED = "CANCELED"
    CANCELING = "CANCELING"
