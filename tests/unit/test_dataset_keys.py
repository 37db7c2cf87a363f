"""A dataset's prefix is the key it shows: S3 reads a key byte for byte, so one holding an
invisible character, a form Unicode's NFKC writes otherwise, or a '.', '..' or empty segment is
another key than a person (or a path) reads, and is refused with the reason; the archive and
root checks see through them."""

from __future__ import annotations

import pytest

from traingrid.errors import RequestInvalid
from traingrid.training.run_request import TrainingRunRequest, dataset_problems
from traingrid.validation import parse

BUCKET = "s3://data-bucket/"
INVISIBLE = "no key of a dataset may hold a control character"
NOT_NFKC = "not in Unicode's NFKC form"
SEGMENT = "an empty ('//'), '.' or '..' segment"
ARCHIVES = "runs/ holds the runs' archives"
ROOT = "is the bucket's root"

REFUSED = {
    "Arabic letter mark": ("image\u061cnet/", [INVISIBLE, "U+061C"]),
    "zero-width space": ("image\u200bnet/", [INVISIBLE, "U+200B"]),
    "byte order mark": ("\ufeffimagenet/", [INVISIBLE, "U+FEFF"]),
    "word joiner": ("image\u2060net/", [INVISIBLE, "U+2060"]),
    "soft hyphen": ("image\u00adnet/", [INVISIBLE, "U+00AD"]),
    "no-break space": ("image\u00a0net/", [INVISIBLE, "U+00A0"]),
    "ideographic space": ("image\u3000net/", [INVISIBLE, "U+3000"]),
    "Hangul filler": ("image\u3164net/", [INVISIBLE, "U+3164"]),
    "variation selector": ("image\ufe0fnet/", [INVISIBLE, "U+FE0F"]),
    "tag character": ("imagenet\U000e0041/", [INVISIBLE, "U+E0041"]),
    "fullwidth runs": ("\uff52\uff55\uff4e\uff53/some-run/",
                       [ARCHIVES, NOT_NFKC, "'runs/some-run/'"]),
    "fullwidth letters": ("\uff49magenet/", [NOT_NFKC, "'imagenet/'"]),
    "a letter and its combining accent": ("cafe\u0301/", [NOT_NFKC]),
    "ligature": ("\ufb01les/", [NOT_NFKC, "'files/'"]),
    "dot then runs": ("./runs/", [ARCHIVES, SEGMENT]),
    "up then runs": ("imagenet/../runs/x/", [ARCHIVES, SEGMENT]),
    "dot segment": ("imagenet/./train/", [SEGMENT]),
    "a dot segment last": ("imagenet/.", [SEGMENT]),
    "empty segment": ("imagenet//train/", [SEGMENT]),
    "empty segment last": ("imagenet//", [SEGMENT]),
    "leading slash": ("/imagenet/", [SEGMENT]),
    "only a dot": (".", [ROOT, SEGMENT]),
    "up from a folder": ("imagenet/../", [ROOT, SEGMENT]),
}


@pytest.mark.parametrize("case", REFUSED)
def test_a_key_that_is_another_than_it_shows_is_refused(case):
    key, words = REFUSED[case]
    problems = dataset_problems(BUCKET + key)
    said = "; ".join(problems)
    assert problems and all(word in said for word in words), problems
    with pytest.raises(RequestInvalid) as refused:
        parse(TrainingRunRequest, {"dataset": BUCKET + key})
    assert [p["pointer"] for p in refused.value.problems] == ["/dataset"]


ACCEPTED = ["imagenet/", "imagenet", "café/", "データ/train/", "a b/c.d/", ".hidden/",
            "v1..v2/", "runs-2026/", "my_runs/", "🏎/"]


@pytest.mark.parametrize("key", ACCEPTED)
def test_a_key_that_is_what_it_shows_is_accepted(key):
    assert dataset_problems(BUCKET + key) == []
    assert parse(TrainingRunRequest, {"dataset": BUCKET + key}).dataset.startswith(BUCKET)


def test_a_lone_surrogate_is_no_key():
    """JSON can escape one (the request as a whole is refused as JSON no model reads); a key
    that holds one is refused too, not sent to S3 to fail there."""
    assert "U+DC80" in "; ".join(dataset_problems(BUCKET + "image\udc80net/"))


def test_every_problem_of_a_key_is_said_at_once():
    problems = dataset_problems(BUCKET + "./\uff52uns\u200b/" + "x" * 1100)
    said = "; ".join(problems)
    assert len(problems) == 3 and INVISIBLE in said and SEGMENT in said, problems
    assert "bytes in UTF-8; an S3 key is at most 1024" in said
