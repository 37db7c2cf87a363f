"""Run names: valid, bounded, deterministic, distinct, and readable."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import example, given, settings
from hypothesis import strategies as st

from traingrid.naming import MAX_NAME, execution_name, run_name_for_object, window_start

# Valid as a Step Functions execution name and as a Batch job name.
VALID = re.compile(r"^[a-z0-9][a-z0-9-]*-\d{8}T\d{4}-[0-9a-f]{12}$")
buckets = st.from_regex(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", fullmatch=True)
# Any S3 key: unicode (including surrogates S3 would refuse), spaces, up to 1,024 characters.
keys = st.text(min_size=1, max_size=1024).filter(lambda k: k.strip("/"))
etags = st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)
moments = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2200, 1, 1),
                       timezones=st.just(UTC))
AT = datetime(2026, 11, 21, 13, 7, 42, tzinfo=UTC)


def test_the_longest_key_is_1024_characters():
    assert len(LONGEST_KEY) == 1024


def test_readable_name_from_the_prefix_and_the_upload_minute():
    name = run_name_for_object("traingrid-demo-data", "imagenet2012/resized/manifest.json",
                               '"d41d8cd98f00b204e9800998ecf8427e"', AT)
    assert re.fullmatch(r"imagenet2012-resized-20261121T1307-[0-9a-f]{12}", name)
    # S3 events carry the ETag without quotes, GetObject with them: one object, one name.
    assert name == run_name_for_object("traingrid-demo-data",
                                       "imagenet2012/resized/manifest.json",
                                       "d41d8cd98f00b204e9800998ecf8427e", AT)


def test_the_minute_is_utc_whatever_the_zone_of_the_time():
    local = AT.astimezone(timezone(timedelta(hours=-8)))
    assert run_name_for_object("b", "d/manifest.json", "e", local) == run_name_for_object(
        "b", "d/manifest.json", "e", AT)


LONGEST_KEY = ("données d'entraînement/ 東京 ドライブ /" * 40)[:1010] + "/manifest.json"


@settings(max_examples=200)
@given(bucket=buckets, key=keys, etag=etags, at=moments)
@example(bucket="b" * 63, key=LONGEST_KEY, etag="f" * 32, at=AT)
@example(bucket="traingrid-demo-data", key="  spaced out / run 1 /manifest.json", etag="0" * 32,
         at=AT)
@example(bucket="bkt", key="/" * 1023 + "x", etag="0" * 32, at=AT)
def test_any_object_gives_a_valid_bounded_deterministic_name(bucket, key, etag, at):
    name = run_name_for_object(bucket, key, etag, at)
    assert len(name) <= MAX_NAME
    assert VALID.fullmatch(name), name
    assert name == run_name_for_object(bucket, key, etag, at)


@settings(max_examples=200)
@given(key=keys, other=keys, etag=etags, other_etag=etags, at=moments)
def test_different_objects_get_different_names(key, other, etag, other_etag, at):
    if (key, etag) != (other, other_etag):
        assert run_name_for_object("bkt", key, etag, at) != run_name_for_object(
            "bkt", other, other_etag, at)


def test_new_content_is_a_new_run():
    first = run_name_for_object("bkt", "d/manifest.json", "a" * 32, AT)
    assert first != run_name_for_object("bkt", "d/manifest.json", "b" * 32, AT)


def test_the_same_manifest_uploaded_again_later_is_a_new_run():
    first = run_name_for_object("bkt", "d/manifest.json", "a" * 32, AT)
    again = run_name_for_object("bkt", "d/manifest.json", "a" * 32, AT + timedelta(minutes=1))
    assert first != again
    assert first == run_name_for_object("bkt", "d/manifest.json", "a" * 32,
                                        AT.replace(second=59))


@settings(max_examples=200)
@given(subject=st.text(max_size=300), at=moments, identity=st.lists(st.text(), max_size=3))
def test_any_subject_gives_a_valid_name(subject, at, identity):
    name = execution_name(subject, at, *identity)
    assert len(name) <= MAX_NAME
    assert VALID.fullmatch(name), name


@settings(max_examples=200)
@given(at=moments, minutes=st.sampled_from([1, 5, 15, 60, 90, 1440]))
def test_window_start_holds_the_moment(at, minutes):
    start = window_start(at, minutes)
    assert start <= at < start + timedelta(minutes=minutes)
    assert window_start(start, minutes) == start
