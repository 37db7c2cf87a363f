"""Whether a run's archive is complete: the job's output index against S3's listing."""

from __future__ import annotations

from traingrid.training.archive import missing_outputs, parse_index

PREFIX = "runs/r1/"


def test_every_indexed_file_at_its_size_is_complete():
    index = parse_index({"files": [{"path": "model/final.ckpt", "size": 10},
                                   {"path": "metrics.json", "size": 3}]})
    assert missing_outputs(index, [], PREFIX) == ["model/final.ckpt", "metrics.json"]
    objects = [{"key": "runs/r1/model/final.ckpt", "size": 10}, {"key": "runs/r1/metrics.json",
                                                                  "size": 3}]
    assert missing_outputs(index, objects, PREFIX) == []


def test_a_missing_or_short_file_is_reported_by_path():
    index = parse_index({"files": [{"path": "a", "size": 1}, {"path": "b/c", "size": 5},
                                   {"path": "d", "size": 2}]})
    objects = [{"key": "runs/r1/a", "size": 1}, {"key": "runs/r1/b/c", "size": 4},
               {"key": "runs/other/d", "size": 2}]
    assert missing_outputs(index, objects, PREFIX) == ["b/c", "d"]


def test_extra_objects_in_s3_do_not_matter():
    index = parse_index({"files": []})
    assert missing_outputs(index, [{"key": "runs/r1/x", "size": 9}], PREFIX) == []


def test_what_is_not_an_index_verifies_nothing():
    for document in (None, [], {"files": "all"}, {"files": [{"path": "", "size": 1}]},
                     {"files": [{"path": "a", "size": -1}]}, {}):
        assert parse_index(document) is None
