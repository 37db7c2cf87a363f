"""Run names from S3 objects: valid, bounded, deterministic, distinct."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from traingrid.naming import MAX_NAME, run_name_for_object

VALID = re.compile(r"^[a-z0-9][a-z0-9-]*$")
keys = st.text(min_size=1, max_size=1024).filter(lambda k: k.strip("/"))
etags = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)


def test_readable_name_from_the_prefix():
    name = run_name_for_object("traingrid-demo-data", "imagenet2012/resized/manifest.json",
                               '"d41d8cd98f00b204e9800998ecf8427e"')
    assert name.startswith("imagenet2012-resized-")
    assert name == run_name_for_object("traingrid-demo-data",
                                       "imagenet2012/resized/manifest.json",
                                       "d41d8cd98f00b204e9800998ecf8427e")


@given(bucket=st.from_regex(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", fullmatch=True),
       key=keys, etag=etags)
def test_any_object_gives_a_valid_bounded_name(bucket, key, etag):
    name = run_name_for_object(bucket, key, etag)
    assert len(name) <= MAX_NAME
    assert VALID.fullmatch(name), name
    assert name == run_name_for_object(bucket, key, etag)


@given(key=keys, other=keys, etag=etags)
def test_different_objects_get_different_names(key, other, etag):
    if key != other:
        assert run_name_for_object("bkt", key, etag) != run_name_for_object("bkt", other, etag)


def test_new_content_is_a_new_run():
    first = run_name_for_object("bkt", "d/manifest.json", "a" * 32)
    assert first != run_name_for_object("bkt", "d/manifest.json", "b" * 32)
