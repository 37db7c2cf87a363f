"""What the API shows of runs, without AWS: timelines from histories, views, paging across both
state machines, names of submitted runs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traingrid.errors import RequestInvalid
from traingrid.runs import listing
from traingrid.runs.submit import derived_name, training_submission
from traingrid.runs.timeline import timeline, visits
from traingrid.runs.view import (
    CAMPAIGN_FANOUT,
    TRAINING_RUN,
    branch_executions,
    console_url,
    run_view,
)
from traingrid.settings import ApiSettings

T0 = datetime(2026, 11, 21, 13, 0, tzinfo=UTC)
ARN = ("arn:aws:states:eu-west-1:123456789012:execution:traingrid-TrainingRun:"
       "imagenet-20261121T1300-abc")
SETTINGS = ApiSettings.from_env({
    "DATA_BUCKET": "data", "TRAINING_RUN_STATE_MACHINE_ARN": "arn:training",
    "CAMPAIGN_FANOUT_STATE_MACHINE_ARN": "arn:fanout", "IDEMPOTENCY_TABLE": "i",
    "DATABASE_SECRET_ARN": "s"})


def event(seconds: float, kind: str, **details) -> dict:
    return {"timestamp": T0 + timedelta(seconds=seconds), "type": kind, **details}


def entered(seconds: float, kind: str, name: str) -> dict:
    return event(seconds, f"{kind}StateEntered", stateEnteredEventDetails={"name": name})


def exited(seconds: float, kind: str, name: str) -> dict:
    return event(seconds, f"{kind}StateExited", stateExitedEventDetails={"name": name})


def failed(seconds: float, error: str) -> dict:
    return event(seconds, "LambdaFunctionFailed",
                 lambdaFunctionFailedEventDetails={"error": error, "cause": "{}"})


# A Plan that failed once and succeeded on retry, a poll loop, a caught failure, the Fail state.
HISTORY = [
    event(0, "ExecutionStarted"),
    entered(0.1, "Task", "Plan"), failed(0.2, "Lambda.TooManyRequestsException"),
    event(1.0, "LambdaFunctionSucceeded"), exited(1.1, "Task", "Plan"),
    entered(1.2, "Task", "CheckFileSystem"), exited(1.5, "Task", "CheckFileSystem"),
    entered(1.5, "Wait", "WaitForFileSystem"), exited(61.5, "Wait", "WaitForFileSystem"),
    entered(61.5, "Task", "CheckFileSystem"), failed(62, "FileSystemFailed"),
    exited(62.1, "Task", "CheckFileSystem"),
    entered(62.2, "Fail", "Failed"),
    event(62.3, "ExecutionFailed", executionFailedEventDetails={"error": "FileSystemFailed"}),
]


def test_every_visit_with_offset_duration_and_outcome():
    states, omitted = timeline(visits(HISTORY), T0, "FAILED", T0 + timedelta(seconds=62.3))
    assert omitted == 0
    assert [(s["state"], s["outcome"]) for s in states] == [
        ("Plan", "retried"), ("CheckFileSystem", "succeeded"),
        ("WaitForFileSystem", "succeeded"), ("CheckFileSystem", "caught"),
        ("Failed", "failed")]
    plan, _, wait, caught, fail = states
    assert plan["errors"] == ["Lambda.TooManyRequestsException"]
    assert (wait["type"], wait["offset_s"], wait["duration_s"]) == ("Wait", 1.5, 60.0)
    assert caught["errors"] == ["FileSystemFailed"]
    assert fail["duration_s"] == pytest.approx(0.1)


def test_a_running_state_is_running_and_lasts_until_now():
    history = HISTORY[:8]
    states, _ = timeline(visits(history), T0, "RUNNING", T0 + timedelta(seconds=30))
    assert (states[-1]["state"], states[-1]["outcome"]) == ("WaitForFileSystem", "running")
    assert states[-1]["duration_s"] == 28.5


def test_a_long_history_keeps_its_latest_visits():
    history = [event(0, "ExecutionStarted")]
    for index in range(600):
        history += [entered(index, "Wait", "WaitForJob"), exited(index + 1, "Wait",
                                                                  "WaitForJob")]
    states, omitted = timeline(visits(history), T0, "RUNNING", T0 + timedelta(seconds=600))
    assert (len(states), omitted) == (500, 100)
    assert states[-1]["offset_s"] == 599


def description(status: str = "SUCCEEDED", output: dict | None = None, **extra) -> dict:
    return {"name": "imagenet-20261121T1300-abc", "executionArn": ARN, "status": status,
            "startDate": T0, "stopDate": T0 + timedelta(seconds=62.3),
            "input": json.dumps({"request": {"dataset": "s3://data/imagenet/"}}),
            **({"output": json.dumps(output)} if output else {}), **extra}


def test_a_run_view_says_where_the_results_are_and_why_it_failed():
    view = run_view(TRAINING_RUN, description(
        "FAILED", error="FileSystemFailed", cause="The file system went FAILED."), HISTORY,
        "data")
    assert (view["status"], view["current_state"], view["duration_s"]) == (
        "FAILED", "Failed", 62.3)
    assert view["error"] == "FileSystemFailed" and view["cause"].startswith("The file")
    assert view["artifacts"] == [{"location": "s3://data/runs/imagenet-20261121T1300-abc/"}]
    assert view["input"]["request"]["dataset"] == "s3://data/imagenet/"
    assert view["console_url"] == console_url(ARN)
    assert console_url(ARN).startswith("https://eu-west-1.console.aws.amazon.com/states/")


def test_artifacts_of_a_finished_run_and_of_each_region():
    output = {"manifest": "s3://data/runs/r/manifest.json", "objects": 4, "bytes": 10}
    (archive,) = run_view(TRAINING_RUN, description(output=output), HISTORY, "data")[
        "artifacts"]
    assert archive["manifest"] == output["manifest"] and archive["objects"] == 4
    jobs = {"jobs": [{"region": "us-west-2", "requested_region": "us-west-2",
                      "artifacts": "s3://a/model.tar.gz"},
                     {"region": "eu-west-1", "requested_region": "eu-west-1",
                      "artifacts": None}]}
    artifacts = run_view(CAMPAIGN_FANOUT, description(output=jobs), HISTORY, "data")[
        "artifacts"]
    assert artifacts == [{"region": "us-west-2", "requested_region": "us-west-2",
                          "location": "s3://a/model.tar.gz"}]


def paged_source(executions: list[dict]):
    """ListExecutions over a fixed list: pages of ``size`` with opaque tokens."""

    def fetch(key: str, token: str | None, size: int):
        start = int(token or 0)
        page = executions[start:start + size]
        after = start + size
        return page, (str(after) if after < len(executions) else None)

    return fetch


@settings(max_examples=100, deadline=None)
@given(training=st.integers(0, 12), fanouts=st.integers(0, 12), limit=st.integers(1, 7))
def test_pages_of_both_state_machines_are_newest_first_without_gaps_or_repeats(
        training, fanouts, limit):
    sources = {
        TRAINING_RUN: [{"name": f"t{i}", "startDate": T0 - timedelta(minutes=2 * i)}
                       for i in range(training)],
        CAMPAIGN_FANOUT: [{"name": f"c{i}", "startDate": T0 - timedelta(minutes=3 * i + 1)}
                          for i in range(fanouts)],
    }
    fetchers = {key: paged_source(items) for key, items in sources.items()}

    def fetch(key: str, token: str | None, size: int):
        return fetchers[key](key, token, size)

    seen, cursor = [], None
    while True:
        page, cursor = listing.newest_first(fetch, list(sources), limit, cursor)
        assert len(page) <= limit
        seen += [execution["name"] for _, execution in page]
        if cursor is None:
            break
    everything = sorted((e for items in sources.values() for e in items),
                        key=lambda e: e["startDate"], reverse=True)
    assert seen == [e["name"] for e in everything]


def test_a_foreign_cursor_is_a_problem_with_next_token():
    with pytest.raises(RequestInvalid) as invalid:
        listing.newest_first(lambda *_: ([], None), [TRAINING_RUN], 5, "bm90LWpzb24")
    assert invalid.value.problems[0]["pointer"] == "/next_token"


def test_a_derived_name_is_stable_within_its_window_and_per_key():
    request = {"dataset": "s3://data/imagenet/", "nodes": 4}
    at = datetime(2026, 11, 21, 13, 1, tzinfo=UTC)
    name = derived_name("imagenet", request, at, None)
    assert name.startswith("imagenet-20261121T1300-")
    assert derived_name("imagenet", request, at + timedelta(minutes=3), None) == name
    assert derived_name("imagenet", request, at + timedelta(minutes=4), None) != name
    assert derived_name("imagenet", request | {"nodes": 5}, at, None) != name
    keyed = derived_name("imagenet", request, at, "key-1")
    assert keyed != name and keyed.startswith("imagenet-20261121T1301-")
    assert derived_name("imagenet", request, at, "key-2") != keyed


def test_a_training_submission_is_validated_named_and_shaped_for_the_state_machine():
    at = datetime(2026, 11, 21, 13, 1, tzinfo=UTC)
    submission = training_submission({"dataset": "s3://data/imagenet2012/resized"}, SETTINGS,
                                     at)
    assert submission.state_machine_arn == "arn:training"
    assert submission.name.startswith("imagenet2012-resized-20261121T1300-")
    assert submission.payload["trigger"] == {"source": "api"}
    assert submission.payload["request"]["dataset"] == "s3://data/imagenet2012/resized/"
    # Defaults filled in: the same request however it is written is the same run.
    spelled_out = training_submission({"dataset": "s3://data/imagenet2012/resized/",
                                       "nodes": 20}, SETTINGS, at)
    assert spelled_out.name == submission.name
    with pytest.raises(RequestInvalid) as invalid:
        training_submission({"dataset": "s3://elsewhere/x/"}, SETTINGS, at)
    assert invalid.value.problems[0]["pointer"] == "/dataset"


def test_a_cursor_is_refused_with_other_filters_and_names_the_ones_it_was_issued_for():
    executions = [{"name": f"t{i}", "startDate": T0 - timedelta(minutes=i)} for i in range(5)]
    fetch = paged_source(executions)
    _, cursor = listing.newest_first(fetch, [TRAINING_RUN], 1, None, {"status": None})
    assert cursor is not None
    with pytest.raises(RequestInvalid) as invalid:
        listing.newest_first(fetch, [TRAINING_RUN], 1, cursor, {"status": "TIMED_OUT"})
    assert invalid.value.problems == [{
        "pointer": "/next_token", "message": "was returned for other filters (none): send the "
        "same filters with it, or leave it out to start again"}]
    # A cursor for state machines outside this query is not this query's either.
    with pytest.raises(RequestInvalid, match="not a token this API returned"):
        listing.newest_first(fetch, [CAMPAIGN_FANOUT], 1, cursor, {"status": None})
    page, _ = listing.newest_first(fetch, [TRAINING_RUN], 1, cursor, {"status": None})
    assert [e["name"] for _, e in page] == ["t1"]


def test_each_state_is_summed_up_over_every_visit_even_those_left_out_of_the_timeline():
    history = [event(0, "ExecutionStarted"), entered(0, "Task", "Plan"),
               exited(1, "Task", "Plan")]
    for index in range(600):
        history += [entered(index + 1, "Wait", "WaitForJob"),
                    exited(index + 2, "Wait", "WaitForJob")]
    history.append(entered(601, "Task", "CheckJob"))
    view = run_view(TRAINING_RUN, description("RUNNING", stopDate=None), history, "data")
    assert view["states_omitted"] == 102
    assert view["by_state"] == {"Plan": {"visits": 1, "outcome": "succeeded"},
                                "WaitForJob": {"visits": 600, "outcome": "succeeded"},
                                "CheckJob": {"visits": 1, "outcome": "running"}}
    failed_run = run_view(TRAINING_RUN, description("FAILED"), HISTORY, "data")
    assert failed_run["by_state"] == {
        "Plan": {"visits": 1, "outcome": "retried"},
        "CheckFileSystem": {"visits": 2, "outcome": "caught"},
        "WaitForFileSystem": {"visits": 1, "outcome": "succeeded"},
        "Failed": {"visits": 1, "outcome": "failed"}}


def exited_with(seconds: float, name: str, output: dict) -> dict:
    return event(seconds, "TaskStateExited",
                 stateExitedEventDetails={"name": name, "output": json.dumps(output)})


def test_a_running_training_run_shows_its_planned_cost_and_an_ended_one_its_output():
    plan = {"estimate": {"compute_usd_per_hour": 97.92, "fsx_usd_per_hour": 0.23,
                         "max_usd": 7067.62}}
    history = [event(0, "ExecutionStarted"), entered(0, "Task", "Plan"),
               exited_with(1, "Plan", {"request": {}, "plan": plan})]
    running = run_view(TRAINING_RUN, description("RUNNING", stopDate=None), history, "data")
    assert running["estimate"] == plan["estimate"]
    ended = run_view(TRAINING_RUN, description(output={"estimate": {"max_usd": 1.5}}),
                     history, "data")
    assert ended["estimate"] == {"max_usd": 1.5}
    assert run_view(TRAINING_RUN, description("RUNNING"), HISTORY, "data")["estimate"] is None


def test_a_fanout_shows_each_regions_job_as_its_branch_last_left_it():
    planned = [{"region": r, "requested_region": r, "instance_type": "ml.p3.16xlarge",
                "instance_count": 4, "usd_per_hour": 10.0, "estimated_usd": 60.0,
                "placement_reason": f"data-local: data is in {r}", "fallbacks": [],
                "hyperparameters": {"epochs": 1}} for r in ("eu-west-1", "us-east-1")]
    moved = {**planned[1], "region": "us-west-2", "status": "InProgress",
             "tried": [{"region": "us-east-1", "reason": "capacity"}]}
    history = [event(0, "ExecutionStarted"), entered(0, "Task", "PlanFanout"),
               exited_with(1, "PlanFanout", {"plan": {"jobs": planned}}),
               entered(2, "Map", "FanOut"), entered(2, "Task", "NextRegion"),
               exited_with(3, "NextRegion", {"job": moved, "buckets": {}})]
    view = run_view(CAMPAIGN_FANOUT, description("RUNNING", stopDate=None), history, "data")
    assert [(j["requested_region"], j["region"], j["status"]) for j in view["jobs"]] == [
        ("eu-west-1", "eu-west-1", "Planned"), ("us-east-1", "us-west-2", "InProgress")]
    assert "hyperparameters" not in view["jobs"][0]
    assert view["estimate"] == {"usd_per_hour": 20.0, "estimated_usd": 120.0}
    final = [{"region": "eu-west-1", "requested_region": "eu-west-1", "status": "Completed"}]
    ended = run_view(CAMPAIGN_FANOUT, description(output={"jobs": final}), history, "data")
    assert ended["jobs"] == [{**final[0], "instance_type": "ml.p3.16xlarge",
                              "instance_count": 4, "estimated_usd": 60.0,
                              "placement_reason": "data-local: data is in eu-west-1"}]


def test_a_running_fanouts_region_jobs_come_from_its_branches_histories():
    planned = [{"region": r, "requested_region": r, "status": "PLANNED"}
               for r in ("eu-west-1", "us-east-1")]
    child = "arn:aws:states:us-east-1:1:execution:CampaignRegion-x:run-eu-west-1"
    history = [event(0, "ExecutionStarted"), entered(0, "Task", "PlanFanout"),
               exited_with(1, "PlanFanout", {"plan": {"jobs": planned}}),
               entered(2, "Map", "FanOut"), entered(2, "Task", "RunRegion"),
               event(2, "TaskSubmitted", taskSubmittedEventDetails={
                   "resource": "startExecution.sync:2", "resourceType": "states",
                   "output": json.dumps({"ExecutionArn": child, "StartDate": "x"})})]
    branch = [event(3, "ExecutionStarted"), entered(3, "Task", "LaunchRegionJob"),
              exited_with(4, "LaunchRegionJob", {"job": {**planned[0], "status": "InProgress",
                                                         "job_name": "run-euw1-1"}})]
    assert branch_executions(history) == [child]
    running = description("RUNNING", stopDate=None)
    alone = run_view(CAMPAIGN_FANOUT, running, history, "data")
    assert [j["status"] for j in alone["jobs"]] == ["Planned", "Planned"]
    view = run_view(CAMPAIGN_FANOUT, running, history, "data", branch_events=branch)
    assert [(j["requested_region"], j["status"]) for j in view["jobs"]] == [
        ("eu-west-1", "InProgress"), ("us-east-1", "Planned")]
    assert view["current_state"] == "RunRegion"  # the fan-out's own, not a branch's


def test_a_failure_caught_on_the_way_to_success_is_a_step_that_succeeded_with_its_error():
    # The training wait times out, is caught and waits again; the run succeeds.
    history = [
        event(0, "ExecutionStarted"),
        entered(1, "Task", "AwaitTrainingJob"),
        event(2, "TaskTimedOut", taskTimedOutEventDetails={"error": "States.Timeout"}),
        exited(2, "Task", "AwaitTrainingJob"),
        entered(3, "Task", "AwaitTrainingJob"), event(4, "TaskSucceeded"),
        exited(4, "Task", "AwaitTrainingJob"),
        event(5, "ExecutionSucceeded"),
    ]
    succeeded, _ = timeline(visits(history), T0, "SUCCEEDED", T0 + timedelta(seconds=5))
    assert [(s["outcome"], s.get("errors")) for s in succeeded] == [
        ("succeeded", ["States.Timeout"]), ("succeeded", None)]
    # While it runs, or when it failed, the catch is still told apart.
    running, _ = timeline(visits(history[:-1]), T0, "RUNNING", T0 + timedelta(seconds=5))
    assert running[0]["outcome"] == "caught"
