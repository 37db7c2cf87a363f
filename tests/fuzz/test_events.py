"""The event-driven entries under bad input: the upload trigger (any key, any manifest), the
scheduled retraining (any event), and the state machines' first steps (any execution input).
None of them fails with an unhandled error: a bad manifest or event is rejected, logged and
counted, and a bad execution input ends in TrainGrid's own RequestInvalid, listing every
problem."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.fuzz.conftest import json_values, malformed_json, nasty_text
from traingrid import errors
from traingrid_local.stack import report, sample_campaign
from traingrid_local.stack.environment import DEMO_BUCKET
from traingrid_local.stack.schedules import scheduled_event

pytestmark = pytest.mark.e2e

FAST = settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                         HealthCheck.too_slow])
TRAINGRID_ERRORS = {name for name, value in vars(errors).items()
                    if isinstance(value, type) and issubclass(value, errors.TrainGridError)}
OUTCOMES = {"ignored", "rejected", "started", "duplicate"}


def s3_event(key: str, etag: str = "0" * 32) -> dict:
    """The "Object Created" event S3 sends EventBridge for an upload to the data bucket."""
    return {
        "version": "0", "id": str(uuid.uuid4()), "detail-type": "Object Created",
        "source": "aws.s3", "account": "123456789012", "time": "2026-11-21T13:00:00Z",
        "region": "us-east-1", "resources": [f"arn:aws:s3:::{DEMO_BUCKET}"],
        "detail": {"version": "0", "bucket": {"name": DEMO_BUCKET},
                   "object": {"key": key, "size": 1, "etag": etag}, "reason": "PutObject"},
    }


def is_s3_key(key: str) -> bool:
    """1-1,024 bytes of UTF-8."""
    try:
        return 0 < len(key.encode("utf-8")) <= 1024
    except UnicodeEncodeError:  # a lone surrogate
        return False


# S3 keys, many of them manifests, in odd places.
keys = st.one_of(
    st.text(min_size=1, max_size=60),
    st.builds(lambda folder: f"{folder}/manifest.json", st.one_of(nasty_text, st.text())),
    st.sampled_from(["manifest.json", "runs/x/manifest.json", "a//manifest.json",
                     " /manifest.json", "fuzz/" + "d/" * 300 + "manifest.json"]),
).filter(is_s3_key)
manifests = st.one_of(json_values.map(lambda v: json.dumps(v).encode()), malformed_json(),
                      st.fixed_dictionaries({}, optional={
                          "nodes": json_values, "name": nasty_text, "dataset": nasty_text,
                          "extra_mpi_params": nasty_text, "colour": json_values,
                      }).map(lambda v: json.dumps(v).encode()))


def assert_trigger_outcome(failed: bool, outcome: dict) -> None:
    assert not failed, outcome
    assert outcome["status"] in OUTCOMES, outcome
    if outcome["status"] == "rejected":
        assert outcome["problems"] and all(p["message"] for p in outcome["problems"])
        assert outcome["reason"].startswith("Invalid manifest s3://")


@settings(FAST, max_examples=30)
@given(key=keys, manifest=manifests)
@example(key="fuzz/empty/manifest.json", manifest=b"")
@example(key="fuzz/deep/manifest.json", manifest=b"[" * 100_000 + b"]" * 100_000)
@example(key="fuzz/nan/manifest.json", manifest=b'{"nodes": NaN}')
@example(key="fuzz/bom/manifest.json", manifest=b"\xef\xbb\xbf{}")
@example(key="fuzz/'; DROP TABLE campaigns; --/manifest.json", manifest=b"{}")
def test_any_upload_starts_a_run_or_is_ignored_or_rejected(served_api, invoke, key, manifest):
    s3 = served_api.emulator.client("s3")
    # The upload itself is delivered to the trigger too (EventBridge, asynchronously).
    put = s3.put_object(Bucket=DEMO_BUCKET, Key=key, Body=manifest)
    failed, outcome = invoke("StartRunFunction", s3_event(key, put["ETag"].strip('"')))
    assert_trigger_outcome(failed, outcome)


@FAST
@given(key=keys)
def test_an_event_for_a_vanished_manifest_is_rejected(invoke, key):
    failed, outcome = invoke("StartRunFunction", s3_event(f"gone/{uuid.uuid4()}/{key}"))
    assert_trigger_outcome(failed, outcome)
    assert outcome["status"] in ("ignored", "rejected")


def test_a_rejected_manifest_is_logged_and_counted(served_api, invoke):
    key = f"fuzz/{uuid.uuid4()}/manifest.json"
    served_api.emulator.client("s3").put_object(Bucket=DEMO_BUCKET, Key=key,
                                                 Body=b'{"nodes": 0, "colour": "red"}')
    failed, outcome = invoke("StartRunFunction", s3_event(key))
    assert not failed and outcome["status"] == "rejected"
    assert {p["pointer"] for p in outcome["problems"]} == {"/nodes", "/colour"}
    records = report.function_log_lines(served_api.emulator, served_api.deployment.stack,
                                        "StartRunFunction")
    assert any(r.get("message") == "manifest rejected; nothing started" and r.get("key") == key
               for r in records)
    assert any("ManifestRejected" in r for r in records)


# --- scheduled retraining ----------------------------------------------------------------

NIGHT = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
schedule_times = st.one_of(nasty_text, json_values, st.sampled_from([
    "2026-11-22", "2026-11-22T02:00:00", "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-05:00", "2026-13-01T00:00:00Z", "2026-11-22T02:00:00Z" * 5]))
schedule_events = st.one_of(
    json_values,
    st.builds(lambda time, drop: {k: v for k, v in scheduled_event(
        "arn:aws:events:us-east-1:123456789012:rule/retrain", NIGHT, "us-east-1").items()
        if k not in drop} | ({"time": time} if "time" not in drop else {}),
        schedule_times, st.sets(st.sampled_from(["time", "detail", "source", "id"]))),
)


@FAST
@given(event=schedule_events)
@example(event={})
@example(event={"time": "2026-11-22"})
def test_any_scheduled_event_retrains_or_is_rejected(invoke, event):
    failed, outcome = invoke("RetrainCampaignsFunction", event)
    assert not failed, outcome
    if outcome.get("status") == "rejected":
        assert outcome["problems"] and outcome["reason"].startswith("Invalid scheduled event")
    else:
        assert {"window", "started", "already_started", "skipped"} <= set(outcome)


def test_a_scheduled_event_with_its_time_still_retrains(invoke):
    event = scheduled_event("arn:aws:events:us-east-1:123456789012:rule/retrain", NIGHT,
                            "us-east-1")
    failed, outcome = invoke("RetrainCampaignsFunction", event)
    assert not failed and outcome["window"] == "2026-11-22T02:00:00Z"
    # Whether the campaign still has new data depends on the fan-outs other tests started.
    assert {e["campaign"] for e in outcome["started"] + outcome["already_started"]
            + outcome["skipped"]} <= {sample_campaign.CAMPAIGN}


# --- the state machines' first steps -------------------------------------------------------


def plan_event(request) -> dict:
    return {"request": request, "run": "fuzz-run", "execution_arn":
            "arn:aws:states:us-east-1:123456789012:execution:TrainingRun:fuzz-run"}


@FAST
@given(request=st.one_of(json_values, st.fixed_dictionaries(
    {"dataset": st.sampled_from([f"s3://{DEMO_BUCKET}/imagenet2012/resized/",
                                 f"s3://{DEMO_BUCKET}/fuzz/none/", "s3://elsewhere/x/"])},
    optional={"nodes": json_values, "epochs": json_values, "fsx": json_values})))
def test_planning_any_execution_input_plans_or_names_the_problem(invoke, request):
    """Whoever may start an execution can send any input: Plan gets whatever ``$.request``
    holds."""
    failed, result = invoke("PlanRunFunction", plan_event(request))
    if failed:
        assert result["errorType"] in TRAINGRID_ERRORS, result
        assert result["errorMessage"].strip()
    else:
        assert result["run"] == "fuzz-run" and result["job"]["nodes"] >= 1


def fanout_event(campaign, execution_input) -> dict:
    name = f"fuzz-{uuid.uuid4().hex[:12]}"
    return {"campaign": campaign, "input": execution_input, "execution_name": name,
            "execution_arn": f"arn:aws:states:us-east-1:123456789012:execution:Fanout:{name}"}


fanout_options = st.one_of(json_values, st.fixed_dictionaries({}, optional={
    "datasets": st.one_of(st.sampled_from(["new", "all"]), json_values),
    "placement": st.one_of(st.sampled_from(["data-local", "cheapest"]), nasty_text),
    "instance_count": json_values, "hyperparameters": json_values, "name": nasty_text}))


@FAST
@given(campaign=st.one_of(st.just(sample_campaign.CAMPAIGN), nasty_text, json_values),
       execution_input=st.one_of(json_values, st.builds(lambda o: {"options": o},
                                                         fanout_options)))
@example(campaign=sample_campaign.CAMPAIGN, execution_input={"options": [1, 2]})
@example(campaign=["av-drive-2026-11"], execution_input={"options": {"datasets": "some"}})
def test_planning_a_fanout_from_any_execution_input_plans_or_lists_every_problem(
        invoke, campaign, execution_input):
    failed, result = invoke("PlanFanoutFunction", fanout_event(campaign, execution_input))
    if failed:
        assert result["errorType"] in TRAINGRID_ERRORS, result
        assert result["errorMessage"].strip()
    else:
        assert isinstance(result["jobs"], list) and result["placement"]


def test_a_fanout_input_with_several_problems_lists_them_all(invoke):
    failed, result = invoke("PlanFanoutFunction", fanout_event(
        "'; DROP TABLE campaigns; --", {"options": {"datasets": "some", "instance_count": 0,
                                                    "colour": "red"}}))
    assert failed and result["errorType"] == "RequestInvalid"
    for pointer in ("/campaign", "/options/datasets", "/options/instance_count",
                    "/options/colour"):
        assert f"{pointer}:" in result["errorMessage"], result["errorMessage"]
