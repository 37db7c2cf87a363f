"""moto's stores that one thread lists while another writes them.

Every execution, Batch job and function of the account runs on a thread of its own, and moto
keeps each service's resources in plain dicts. A DescribeJobs walking ``_jobs`` while another
run's SubmitJob adds to it fails with "dictionary changed size during iteration" as soon as the
walk runs Python code between items (``job.describe()`` does), so one run of many fails for
another's sake. AWS lists while it writes; the emulator must too.

Each such store becomes a :class:`SnapshotDict`: listing it walks a copy taken in one step
(copying a dict's keys, values or items is a single C call that holds the interpreter lock),
never the live dict. Lookups and writes are a dict's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from moto.batch.models import BatchBackend
from moto.fsx.models import FSxBackend
from moto.logs.models import LogGroup, LogsBackend
from moto.sagemaker.models import SageMakerModelBackend

from traingrid_local.emulator.patching import PATCHES


class SnapshotDict(dict):  # type: ignore[type-arg]
    """A dict whose iteration walks a copy taken at once."""

    def __iter__(self) -> Iterator[Any]:
        return iter(list(dict.keys(self)))

    def keys(self) -> list[Any]:  # type: ignore[override]
        return list(dict.keys(self))

    def values(self) -> list[Any]:  # type: ignore[override]
        return list(dict.values(self))

    def items(self) -> list[tuple[Any, Any]]:  # type: ignore[override]
        return list(dict.items(self))


# The stores the account's threads write while others list them: (owner, attribute).
SHARED_STORES: tuple[tuple[type, str], ...] = (
    (BatchBackend, "_jobs"),  # SubmitJob from one execution, DescribeJobs/ListJobs from another
    (FSxBackend, "file_systems"),  # created and deleted by runs while jobs look theirs up
    (LogsBackend, "groups"),
    (LogGroup, "streams"),  # every job and function adds streams to /aws/batch/job, ...
    (SageMakerModelBackend, "training_jobs"),  # a fan-out's regions start jobs side by side
)


def _snapshotting(attribute: str) -> Callable[[Any], Any]:
    def factory(previous: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            previous(self, *args, **kwargs)
            setattr(self, attribute, SnapshotDict(getattr(self, attribute)))
        return __init__
    return factory


def apply() -> None:
    for owner, attribute in SHARED_STORES:
        PATCHES.wrap(owner, "__init__", _snapshotting(attribute))
