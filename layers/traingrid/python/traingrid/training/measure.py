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

from traingrid.aws import s3
from traingrid.errors import DatasetNotFound, RequestInvalid
from traingrid.training.sizing import DatasetSize
from traingrid.vocabulary.training_run import Measuring

# Threads listing folders at once: S3 serves at least 5,500 GET/HEAD requests a second per
# partitioned prefix (Amazon S3 User Guide, "Best practices design patterns"); 16 lists in flight
# are far below it, and a page is mostly waiting on the network.
WORKERS = 16
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


def measure_part(bucket: str, prefix: str, progress: Measuring | None, budget: Budget,
                 workers: int = WORKERS, trace: list[list[int]] | None = None
                 ) -> tuple[Measuring, bool]:
    """Count on from ``progress`` as far as ``budget`` allows; returns the progress and
    whether the whole prefix is counted. At least one page is listed, so every call moves on.
    ``trace`` (for the bench) gets, per page of folders, each folder's pages."""
    done = dict(progress or start())
    after = done["after"]
    if after and not after.startswith(prefix):
        raise RequestInvalid([{"pointer": "", "message": f"{after!r} is not under {prefix!r}"}])
    list_page = s3.lister(max_keys=PAGE_KEYS)
    pages_before = budget.used
    complete = False

    def count(key: str, objects: int, size: int) -> None:
        done["objects"] += objects
        done["bytes"] += size
        done["after"] = key or done["after"]

    with ThreadPoolExecutor(workers) as pool:
        # Started inside a folder: its rest comes first (the listing below skips the folder).
        inside = folder_of(prefix, after) if after else None
        first: Future[Tally] | None = None
        if inside:
            first = pool.submit(list_folder, list_page, bucket, inside, after, budget, True)
        token: str | None = None
        stopped = False
        while not stopped:
            if first is not None:
                tally = first.result()
                count(tally.last, tally.objects, tally.bytes)
                if not tally.complete:
                    break
                first = None
            # Until a key is counted, the budget does not stop the next page: every call
            # moves on, by a page or two beyond its budget at most.
            if not budget.take(force=done["after"] == after):
                break
            page = list_page(bucket, prefix, delimiter=DELIMITER,
                             start_after="" if token else done["after"], token=token)
            forced = done["after"] == after and bool(page.prefixes) and (
                not page.objects or page.prefixes[0] < page.objects[0][0])
            entries: list[tuple[str, int | Future[Tally]]] = [
                *page.objects,
                *((folder, pool.submit(list_folder, list_page, bucket, folder, "", budget,
                                       forced and i == 0))
                  for i, folder in enumerate(page.prefixes))]
            entries.sort(key=lambda entry: entry[0])
            folders: list[int] = []
            for key, item in entries:
                if isinstance(item, int):
                    count(key, 1, item)
                    continue
                tally = item.result()
                folders.append(tally.pages)
                count(tally.last, tally.objects, tally.bytes)
                if not tally.complete:
                    stopped = True
                    break
            if trace is not None:
                trace.append(folders)
            if not stopped and page.next_token is None:
                complete = True
                break
            token = page.next_token
    done["pages"] += budget.used - pages_before
    done["parts"] += 1
    return Measuring(**done), complete  # type: ignore[typeddict-item]


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
