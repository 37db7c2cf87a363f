"""Sizing a dataset of any size, a bounded part at a time.

One call lists what its budget allows (pages and time) and returns where it stopped: the
objects and bytes counted so far and ``after``, the last key counted. Every key up to
``after``, in S3's order, is counted, and none after it; the next call goes on from there (the
TrainingRun's MeasureDataset loop; ``GET /plans/{token}``). The progress is a few numbers and
one key (at most 1,024 bytes), however large the dataset.

Within a call the listing runs in parallel by common prefix. One ListObjectsV2 call with
``Delimiter='/'`` gives a page of the prefix's own objects and of its first-level folders (a
folder, a common prefix, counts as one of the page's 1,000 entries); each folder is listed to
its end, without a delimiter, on a thread of its own. ImageNet's training set is 1,000 class
folders of 732 to 1,300 JPEGs: 1 page of folders, then 2,000 pages on 16 threads. A prefix
without folders is listed a page after another, across calls.

The results are summed in key order: at the first folder a budget stopped, ``after`` becomes
its last listed key, and what was listed beyond it (other folders, later objects) is dropped and
listed again by the next call. S3 filters out a common prefix "not lexicographically greater than
the StartAfter value" (ListObjectsV2, ``Delimiter``), so a call that starts inside a folder lists
that folder's rest itself, first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from traingrid.aws import clients, s3
from traingrid.errors import DatasetNotFound, RequestInvalid
from traingrid.training.sizing import DatasetSize
from traingrid.vocabulary.training_run import Measuring

# Threads listing folders at once: S3 serves at least 5,500 GET/HEAD requests a second per
# partitioned prefix (Amazon S3 User Guide, "Best practices design patterns"); 16 lists in flight
# are far below it, and a page is mostly waiting on the network.
WORKERS = clients.LISTING_CONNECTIONS  # one pooled connection each
DELIMITER = "/"
# ListObjectsV2's MaxKeys: "By default, the action returns up to 1,000 key names", its most.
PAGE_KEYS = 1000


@dataclass
class Budget:
    """What one call may spend: pages over all its threads, and time (``time.monotonic``)."""

    pages: int
    deadline: float
    used: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, force: bool = False) -> bool:
        """One more page, if the budget allows it (``force``: whatever it says)."""
        with self.lock:
            if not force and (self.used >= self.pages or time.monotonic() >= self.deadline):
                return False
            self.used += 1
            return True


@dataclass
class Tally:
    """One folder's listing: what it counted, up to its last key; complete or not."""

    objects: int = 0
    bytes: int = 0
    pages: int = 0
    last: str = ""
    complete: bool = False


def start() -> Measuring:
    return {"objects": 0, "bytes": 0, "pages": 0, "parts": 0, "after": ""}


def folder_of(prefix: str, key: str) -> str | None:
    """The first-level folder (common prefix) under ``prefix`` that holds ``key``, if any."""
    rest = key[len(prefix):]
    cut = rest.find(DELIMITER)
    return None if cut < 0 else prefix + rest[:cut + 1]


def list_folder(list_page: Callable[..., s3.ListPage], bucket: str, folder: str, after: str,
                budget: Budget, force_first: bool) -> Tally:
    """``folder``'s keys after ``after`` (every key when empty), as far as ``budget`` goes."""
    tally, token, first = Tally(), None, True
    while budget.take(force=force_first and first):
        page = list_page(bucket, folder, start_after=after if first else "", token=token)
        first = False
        tally.pages += 1
        for key, size in page.objects:
            tally.objects += 1
            tally.bytes += size
            tally.last = key
        if page.next_token is None:
            tally.complete = True
            break
        token = page.next_token
    return tally


class _Part:
    """One call's listing: the running sums, the threads, the budget."""

    def __init__(self, bucket: str, prefix: str, progress: Measuring | None, budget: Budget,
                 pool: ThreadPoolExecutor) -> None:
        self.bucket, self.prefix, self.budget, self.pool = bucket, prefix, budget, pool
        self.done = Measuring(**(progress or start()))  # type: ignore[typeddict-item]
        self.started_after = self.done["after"]
        self.list_page = s3.lister(max_keys=PAGE_KEYS)

    @property
    def moved(self) -> bool:
        return self.done["after"] != self.started_after

    def count(self, tally: Tally) -> bool:
        """Add a folder's tally; whether it was complete (else the part ends at it)."""
        self.done["objects"] += tally.objects
        self.done["bytes"] += tally.bytes
        self.done["after"] = tally.last or self.done["after"]
        return tally.complete

    def folder(self, folder: str, after: str, force_first: bool) -> Future[Tally]:
        return self.pool.submit(list_folder, self.list_page, self.bucket, folder, after,
                                self.budget, force_first)

    def page(self, token: str | None, trace: list[list[int]] | None) -> tuple[bool, str | None]:
        """One page of the prefix's objects and folders, each folder listed on a thread,
        summed in key order; (whether all of it was counted, the next page's token)."""
        page = self.list_page(self.bucket, self.prefix, delimiter=DELIMITER,
                              start_after="" if token else self.done["after"], token=token)
        forced = not self.moved and bool(page.prefixes) and (
            not page.objects or page.prefixes[0] < page.objects[0][0])
        entries: list[tuple[str, int | Future[Tally]]] = [
            *page.objects,
            *((folder, self.folder(folder, "", forced and i == 0))
              for i, folder in enumerate(page.prefixes))]
        entries.sort(key=lambda entry: entry[0])
        folders: list[int] = []
        complete = True
        for key, item in entries:
            tally = Tally(1, item, 0, key, True) if isinstance(item, int) else item.result()
            if not isinstance(item, int):
                folders.append(tally.pages)
            if not self.count(tally):
                complete = False
                break
        if trace is not None:
            trace.append(folders)
        return complete, page.next_token


def measure_part(bucket: str, prefix: str, progress: Measuring | None, budget: Budget,
                 workers: int = WORKERS, trace: list[list[int]] | None = None
                 ) -> tuple[Measuring, bool]:
    """Count on from ``progress`` as far as ``budget`` allows; returns the progress and
    whether the whole prefix is counted. At least one page is listed, so every call moves on.
    ``trace`` (for the bench) gets, per page of folders, each folder's pages."""
    after = (progress or start())["after"]
    if after and not after.startswith(prefix):
        raise RequestInvalid([{"pointer": "", "message": f"{after!r} is not under {prefix!r}"}])
    pages_before = budget.used
    complete = False
    with ThreadPoolExecutor(workers) as pool:
        part = _Part(bucket, prefix, progress, budget, pool)
        # Started inside a folder: its rest comes first (the listing below skips the folder).
        inside = folder_of(prefix, after) if after else None
        listed = part.count(part.folder(inside, after, True).result()) if inside else True
        token: str | None = None
        # Until a key is counted, the budget does not stop the next page: every call moves
        # on, by a page or two beyond its budget at most.
        while listed and budget.take(force=not part.moved):
            listed, token = part.page(token, trace)
            if listed and token is None:
                complete = True
                break
    part.done["pages"] += budget.used - pages_before
    part.done["parts"] += 1
    return part.done, complete


def measure(bucket: str, prefix: str, budget: Budget,
            progress: Measuring | None = None) -> tuple[Measuring, DatasetSize | None]:
    """One part, and the dataset's size once all of it is counted (DatasetNotFound when the
    prefix holds nothing)."""
    progress, complete = measure_part(bucket, prefix, progress, budget)
    if not complete:
        return progress, None
    if not progress["objects"]:
        raise DatasetNotFound(
            f"No objects under s3://{bucket}/{prefix}: upload the dataset there first.")
    return progress, DatasetSize(progress["objects"], progress["bytes"])


def budget_for(pages: int, seconds: float) -> Budget:
    return Budget(pages=pages, deadline=time.monotonic() + seconds)
