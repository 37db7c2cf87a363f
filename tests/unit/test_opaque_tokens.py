"""The tokens the API hands out to go on from (a plan's GET /plans/{token}, GET /runs'
next_token) are unsigned: each holds only what its caller could send anyway, so a made-up one
is read as a request is, every field bounded and checked. Negative or huge counts, deep
nesting, a key S3 cannot be asked for or a malformed position is a 400 saying what is wrong,
never a negative plan or a 500."""

from __future__ import annotations

import base64
import zlib

import pytest

from traingrid import opaque
from traingrid.errors import RequestInvalid
from traingrid.runs import listing
from traingrid.runs.view import TRAINING_RUN
from traingrid.settings import Settings
from traingrid.training import plan_step
from traingrid.training.plan import DatasetSize

REQUEST = {"dataset": "s3://data/imagenet/", "nodes": 2}
PROGRESS = {"objects": 1200, "bytes": 10**11, "pages": 3, "parts": 1,
            "after": "imagenet/n01440764/img-0999.jpeg"}
SETTINGS = Settings(data_bucket="data")


@pytest.fixture
def listed(monkeypatch):
    """Sizing that finishes the listing at once, keeping the progress each call went on from."""
    seen = []

    def size_part(bucket, prefix, budget, progress):
        seen.append(progress)
        done = dict(progress or plan_step.measure.start())
        done["objects"] += 100
        done["bytes"] += 10**9
        return done, DatasetSize(done["objects"], done["bytes"])

    monkeypatch.setattr(plan_step, "size_part", size_part)
    return seen


def _nested(depth: int) -> list:
    inner: list = []
    for _ in range(depth):
        inner = [inner]
    return inner


def _deflated(text: str) -> str:
    return base64.urlsafe_b64encode(zlib.compress(text.encode())).decode().rstrip("=")


def follow(token: str) -> tuple[int, dict]:
    return plan_step.plan_request(None, SETTINGS, token=token)


def refusal(token: str) -> list[str]:
    with pytest.raises(RequestInvalid) as refused:
        follow(token)
    assert all(p["pointer"] == "" for p in refused.value.problems)
    return [p["message"] for p in refused.value.problems]


def test_a_plans_token_goes_on_from_where_it_stopped(listed):
    status, planned = follow(plan_step._token(REQUEST, PROGRESS))
    assert status == 200 and listed == [PROGRESS]
    assert planned["dataset"]["objects"] == 1300 and planned["dataset"]["bytes"] == 101 * 10**9


FORGED = {
    "negative counts": ({**PROGRESS, "objects": -5, "bytes": -1},
                        ["objects is -5", "bytes is -1"]),
    "a count past a bigint": ({**PROGRESS, "bytes": 10**4000}, ["bytes is 1000000"]),
    "a count that is not a whole number": ({**PROGRESS, "pages": 2.5, "parts": "1"},
                                           ["pages is 2.5", "parts is '1'"]),
    "a count that is a boolean": ({**PROGRESS, "parts": True}, ["parts is True"]),
    "a missing count": ({k: v for k, v in PROGRESS.items() if k != "pages"},
                        ["pages is None"]),
    "a key past S3's 1,024 bytes": ({**PROGRESS, "after": "imagenet/" + "x" * 1100},
                                    ["after is not an S3 key"]),
    "a key S3 cannot be asked for": ({**PROGRESS, "after": "imagenet/\udc80"},
                                     ["after is not an S3 key"]),
    "no progress": (None, ["it holds no listing's progress"]),
}


@pytest.mark.parametrize("case", FORGED)
def test_a_forged_plans_token_is_refused_saying_why(listed, case):
    progress, words = FORGED[case]
    messages = refusal(opaque.encode({"request": REQUEST, "measuring": progress}))
    assert len(messages) == len(words), messages
    for message, word in zip(messages, words, strict=True):
        assert word in message and "follow the 'next' of a 202 from POST /plans" in message
    assert listed == []  # nothing listed, nothing planned


def test_a_token_nested_deeper_than_any_request_is_refused_not_a_recursion_error(listed):
    deep = '{"request": ' + "[" * 20_000 + "]" * 20_000 + ', "measuring": {}}'
    (message,) = refusal(_deflated(deep))
    assert "nested more than 32 levels deep" in message


def test_a_token_that_inflates_past_its_bound_or_is_no_token_is_refused(listed):
    assert "inflates past" in refusal(_deflated(" " * (plan_step.TOKEN_BYTES + 1)))[0]
    assert "not a token" in refusal("not-a-token")[0]
    assert "not a whole token" in refusal(_deflated("{}")[:-6])[0]
    assert "it holds no request" in refusal(opaque.encode({"measuring": PROGRESS}))[0]


@pytest.mark.parametrize("cursor", [
    {"size": 5, "at": {TRAINING_RUN: [None, 0]}, "filters": ["status"]},
    {"size": 5, "at": {TRAINING_RUN: [None, -1]}, "filters": {}},
    {"size": 5, "at": {TRAINING_RUN: [None, 0]}, "filters": {}, "deep": _nested(40)}])
def test_a_forged_runs_cursor_is_a_problem_with_next_token(cursor):
    with pytest.raises(RequestInvalid) as refused:
        listing.newest_first(lambda *_: ([], None), [TRAINING_RUN], 5, opaque.encode(cursor),
                             {})
    assert [p["pointer"] for p in refused.value.problems] == ["/next_token"]
