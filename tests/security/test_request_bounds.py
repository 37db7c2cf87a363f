"""Requests built to cost: tens of thousands of keys, names or problems in a few hundred KB.
Refusing one takes work in proportion to the body at most, an object or a map with more
entries than any request has is refused as a whole, and the answer stays small: the first
problems, a rule they share stated once, and how many there were (Lambda answers at most
6 MB). Over real HTTP against `traingrid serve`; nothing starts."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from tests.integration.conftest import serving
from traingrid.campaigns.fanout_request import TRAINER_HYPERPARAMETERS
from traingrid.errors import LISTED_PROBLEMS
from traingrid_local.api.client import ApiClient
from traingrid_local.stack.environment import DEMO_BUCKET
from traingrid_local.stack.sample_campaign import CAMPAIGN

pytestmark = pytest.mark.e2e

DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"
# Far more than every answer below needs, far less than what the old answers were.
SMALL = 32 * 1024


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serving(tmp_path_factory, 600, "bounds", throttled=False) as api:  # 400s, not 429s
        yield api


def post(url: str, target: str, body: object) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        connection.request("POST", target, json.dumps(body),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def run_names(url: str) -> set[str]:
    return {run["name"] for run in ApiClient(url, timeout=60).get("/runs", limit=100)["runs"]}


def refused(served, target: str, body: object) -> dict:
    before = run_names(served.url)
    status, data = post(served.url, target, body)
    assert status == 400, (status, data[:500])
    assert len(data) < SMALL, len(data)
    assert run_names(served.url) == before
    return json.loads(data)


def test_thirty_thousand_unknown_keys_are_one_problem(served):
    """~450 KB: once 30,000 problems, each in the answer twice, found in quadratic time."""
    body = {"dataset": DATASET} | {f"unknown_{i:05d}": 1 for i in range(30_000)}
    answer = refused(served, "/runs", body)
    assert answer["problems"] == [{"pointer": "", "message": "has 30001 keys; at most 100 "
                                                             "are taken"}]
    assert answer["problem_count"] == 1


@pytest.mark.parametrize(("body", "pointer", "words"), [
    # 119 KB of names: once a 6.3 MB answer, the list of the trainer's names in each problem.
    ({"hyperparameters": {f"h{i:05d}": 1 for i in range(10_000)}}, "/hyperparameters",
     "has 10000 keys; at most 100"),
    ({"regions": {f"{a}{b}-west-1": {} for a in "abcdefgh" for b in "abcdefgh"}}, "/regions",
     "has 64 keys; at most 50"),
    ({"regions": {"eu-west-1": {"hyperparameters": {"lr": "1" * 2501}}}},
     "/regions/eu-west-1/hyperparameters/lr", "lr must be a number"),
], ids=["hyperparameter names", "regions", "a hyperparameter's value"])
def test_a_fanouts_maps_and_values_are_bounded_before_each_entry_is_checked(
        served, body, pointer, words):
    answer = refused(served, f"/campaigns/{CAMPAIGN}/runs", body)
    assert {p["pointer"] for p in answer["problems"]} == {pointer}, answer
    assert any(words in p["message"] for p in answer["problems"]), answer


def test_five_thousand_problems_answer_the_first_twenty_and_state_the_rule_once(served):
    """50 regions × 100 unknown hyperparameter names, each within its bounds."""
    regions = {f"{a}{b}-west-1": {"hyperparameters": {f"h{i:03d}": 1 for i in range(100)}}
               for a in "abcdefg" for b in "abcdefg"} | {"eu-west-1": {}}
    answer = refused(served, f"/campaigns/{CAMPAIGN}/runs", {"regions": regions})
    assert answer["problem_count"] == 4900
    problems = answer["problems"]
    assert len(problems) == LISTED_PROBLEMS
    assert problems[0] == {
        "pointer": "/regions/aa-west-1/hyperparameters/h000",
        "message": f"the trainer has no hyperparameter h000; it takes "
                   f"{', '.join(TRAINER_HYPERPARAMETERS)}"}
    assert problems[1] == {"pointer": "/regions/aa-west-1/hyperparameters/h001",
                           "message": "the trainer has no hyperparameter h001"}
    assert answer["message"].startswith("Invalid request (4900 problem(s)): ")
    assert answer["message"].endswith(f"; and {4900 - LISTED_PROBLEMS} more")
    assert answer["message"].count("it takes") == 1
