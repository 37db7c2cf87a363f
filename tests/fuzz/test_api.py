"""The API function under bytes no OpenAPI generator sends: bodies that are not JSON (or are
JSON no parser should accept: NaN, 1e999, deep nesting), SQL in a campaign id, and the exact
Idempotency-Key rule. Each gets a clear answer, never a 5xx; a 400 lists every problem with a
pointer into the body. The examples go to the deployed API function as API Gateway's proxy
events. What a generator does send, schema-valid and schema-invalid requests over real HTTP
including stateful sequences, is tests/contract's (Schemathesis against `traingrid serve`)."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.fuzz.conftest import any_body, assert_clear_answer, json_values, nasty_text
from traingrid.api.idempotency import KEY_PATTERN, MAX_KEY_LENGTH
from traingrid.vocabulary.catalog import INSTANCE_TYPES
from traingrid_local.stack import sample_campaign
from traingrid_local.stack.environment import DEMO_BUCKET

pytestmark = pytest.mark.e2e

FAST = settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                         HealthCheck.too_slow])
CAMPAIGN = sample_campaign.CAMPAIGN
SUBMITTED = {"name", "pipeline", "status", "started", "execution_arn", "console_url"}

# Requests close to valid ones, with a field or two gone wrong: they reach deeper checks.
# Datasets are under a prefix that holds nothing: a run that starts ends at its Plan.
near_runs = st.fixed_dictionaries(
    {"dataset": st.one_of(
        st.from_regex(rf"s3://{DEMO_BUCKET}/fuzz/[a-z0-9/]{{0,12}}", fullmatch=True),
        st.sampled_from(["s3://other-bucket/x/", "s3://UPPER/x/", "s3://a/", "http://x/y/"]),
        json_values)},
    optional={
        "nodes": st.one_of(st.integers(-5, 600), json_values),
        "instance_type": st.one_of(st.sampled_from(sorted(INSTANCE_TYPES)), nasty_text),
        "epochs": st.one_of(st.integers(-1, 20_000), st.floats(allow_nan=False)),
        "warmup_epochs": st.integers(-1, 100),
        "name": nasty_text,
        "extra_mpi_params": nasty_text,
        "fsx": st.one_of(json_values, st.fixed_dictionaries({}, optional={
            "deployment_type": nasty_text, "storage_capacity_gib": st.integers(0, 10**7)})),
        "timeouts": json_values,
        "colour": json_values,
    })
near_fanouts = st.fixed_dictionaries({}, optional={
    "name": nasty_text,
    "datasets": st.one_of(st.sampled_from(["new", "all"]), nasty_text),
    "placement": st.one_of(st.sampled_from(["data-local", "cheapest"]), nasty_text),
    "instance_type": st.one_of(st.just("ml.p3.2xlarge"), nasty_text),
    "instance_count": st.one_of(st.integers(-1, 600), json_values),
    "hyperparameters": st.one_of(json_values, st.dictionaries(nasty_text, json_values,
                                                              max_size=3)),
})
bodies = st.one_of(any_body(), near_runs.map(lambda b: json.dumps(b).encode()))


def assert_submission(status: int, body: dict) -> None:
    assert_clear_answer(status, body)
    assert status in (200, 202, 400, 403, 404, 409, 422), (status, body)
    if status in (200, 202):
        assert set(body) >= SUBMITTED and body["started"] is (status == 202)


@FAST
@given(body=bodies)
@example(body=b'{"dataset": "s3://traingrid-demo-data/fuzz/", "nodes": NaN}')
@example(body=b"[" * 100_000 + b"]" * 100_000)
def test_post_runs_answers_any_body_clearly(api_request, body):
    status, _, answer = api_request("POST", "/runs", body)
    assert_submission(status, answer)


@FAST
@given(campaign=nasty_text, body=st.one_of(any_body(), near_fanouts.map(
    lambda b: json.dumps(b).encode())))
@example(campaign="'; DROP TABLE campaigns; --", body=b"{}")
@example(campaign=CAMPAIGN, body=b'{"hyperparameters": {"lr": NaN}}')
@example(campaign=CAMPAIGN, body=b'{"hyperparameters": {"lr": 1e999}}')
def test_post_campaign_runs_answers_any_campaign_and_body_clearly(api_request, campaign, body):
    status, _, answer = api_request("POST", f"/campaigns/{quote(campaign, safe='')}/runs", body)
    assert_submission(status, answer)
    if status in (200, 202):
        assert campaign == CAMPAIGN


def test_a_campaign_id_made_of_sql_is_just_an_unknown_campaign(api_request):
    injected = "av-drive-2026-11'; DROP TABLE campaigns; --"
    status, _, answer = api_request("POST", f"/campaigns/{quote(injected, safe='')}/runs",
                                    b"{}")
    assert status == 404 and injected in answer["message"]
    status, _, answer = api_request("GET", "/campaigns")
    assert status == 200 and [c["id"] for c in answer["campaigns"]] == [CAMPAIGN]


@settings(FAST, max_examples=25)  # each key that is taken starts a run
@given(key=st.one_of(nasty_text, st.text(min_size=250, max_size=300)))
@example(key="k" * 256)
@example(key=" leading")
def test_any_idempotency_key_is_used_or_refused_clearly(api_request, key):
    body = json.dumps({"dataset": f"s3://{DEMO_BUCKET}/fuzz/keyed/", "nodes": 1}).encode()
    status, _, answer = api_request("POST", "/runs", body, {"Idempotency-Key": key})
    assert_submission(status, answer)
    ok = len(key) <= MAX_KEY_LENGTH and KEY_PATTERN.fullmatch(key) is not None
    assert (status == 400) is not ok, (key, status, answer)
