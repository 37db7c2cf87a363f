"""Sizing a dataset a bounded part at a time (``training.measure``), on moto's S3: every call
lists at most its budget's pages (two more at most, so each call moves on), parts add up to
exactly what a full listing counts, whatever the layout (folders, flat, nested, a folder cut
mid-way, objects beside folders)."""

from __future__ import annotations

import time
from typing import Any

import boto3
import pytest
from moto import mock_aws

from traingrid.aws import clients, s3
from traingrid.errors import DatasetNotFound
from traingrid.training import measure

BUCKET = "measure-test-data"


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        clients.reset()
        client = boto3.client("s3")
        client.create_bucket(Bucket=BUCKET)

        def put(keys: list[str]) -> None:
            for i, key in enumerate(keys):
                client.put_object(Bucket=BUCKET, Key=key, Body=b"x" * (i % 7))

        yield put
        clients.reset()


def full_size(prefix: str) -> tuple[int, int]:
    listed = list(s3.objects_under(BUCKET, prefix))
    return len(listed), sum(o["size"] for o in listed)


def measure_in_parts(prefix: str, pages: int, monkeypatch: pytest.MonkeyPatch,
                     max_keys: int = 5) -> tuple[measure.Measuring, list[int]]:
    """Every part with a budget of ``pages`` pages of ``max_keys`` keys; pages each part took."""
    monkeypatch.setattr(measure, "PAGE_KEYS", max_keys)
    progress: measure.Measuring | None = None
    per_part = []
    for _ in range(200):
        budget = measure.budget_for(pages, 60)
        progress, size = measure.measure(BUCKET, "data/", budget, progress)
        per_part.append(budget.used)
        if size is not None:
            return progress, per_part
    raise AssertionError("never finished")


LAYOUTS = {
    "folders": [f"data/c{c:02d}/img{i:03d}.jpg" for c in range(12) for i in range(c * 3 + 1)],
    "flat": [f"data/img{i:03d}.jpg" for i in range(53)],
    "mixed": ([f"data/a{i}.txt" for i in range(4)] + [f"data/c1/{i}" for i in range(17)]
              + ["data/c1.txt", "data/c10", "data/c2/deep/er/x", "data/z.bin"]
              + [f"data/c2/{i:02d}" for i in range(23)] + ["other/x", "data-not/y"]),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("pages", [1, 3, 50])
def test_parts_add_up_to_the_full_listing_within_their_page_budget(
        bucket, monkeypatch, layout, pages):
    bucket(LAYOUTS[layout])
    progress, per_part = measure_in_parts("data/", pages, monkeypatch)
    assert (progress["objects"], progress["bytes"]) == full_size("data/")
    assert progress["parts"] == len(per_part)
    assert progress["pages"] == sum(per_part)
    assert max(per_part) <= pages + 2, per_part
    if pages == 1:
        assert len(per_part) > 3  # the loop, not one call
    assert len(progress["after"]) < 64  # the state is one key and a few numbers


def test_a_whole_small_dataset_in_one_part_on_parallel_folders(bucket, monkeypatch):
    bucket(LAYOUTS["folders"])
    trace: list[list[int]] = []
    progress, complete = measure.measure_part(BUCKET, "data/", None,
                                              measure.budget_for(1000, 60), trace=trace)
    assert complete and (progress["objects"], progress["bytes"]) == full_size("data/")
    assert trace == [[1] * 12] and progress["pages"] == 13


def test_the_time_budget_stops_a_part(bucket, monkeypatch):
    bucket(LAYOUTS["flat"])
    monkeypatch.setattr(measure, "PAGE_KEYS", 5)
    spent = measure.Budget(pages=1000, deadline=time.monotonic() - 1)
    progress, complete = measure.measure_part(BUCKET, "data/", None, spent)
    assert not complete and progress["pages"] == 1 and progress["objects"] == 5


def test_an_empty_prefix_is_not_a_dataset(bucket):
    bucket(["elsewhere/x"])
    with pytest.raises(DatasetNotFound):
        measure.measure(BUCKET, "data/", measure.budget_for(10, 60))
