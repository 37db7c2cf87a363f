"""The TrainingRun waits for its training job on a task token that the job's state-change event
completes; without the event, the janitor's next pass notices the end (and, were the janitor
gone too, the wait's own day-long timeout)."""

from __future__ import annotations

import pytest

from tests.integration.conftest import finish
from traingrid_local.demo.runner import DEFAULT_KEY, SCENARIOS, manifest_body, upload_sample_dataset
from traingrid_local.emulator import batch
from traingrid_local.stack.environment import DEMO_BUCKET

FALLBACK_S = 24 * 3600  # the template's default JobEventFallbackSeconds
JANITOR_INTERVAL_S = 5 * 60  # the template's default JanitorSchedule
# Step Functions Standard: $0.025 per 1,000 state transitions.
USD_PER_TRANSITION = 0.000025


def test_the_jobs_event_ends_the_wait_within_seconds(run_scenario):
    outcome = run_scenario("happy")

    run = outcome.execution
    assert run["status"] == "SUCCEEDED"
    # The job exported its outputs before it ended: the run verified them in S3 and deleted
    # the file system seconds after the job's end, without an export task, not at the next
    # fallback check 45 minutes on. (The ≤ 5 s median is measured by make bench; one run
    # on the fast clock can take a few more seconds on a busy machine.)
    assert run["cleanup"]["lag_s"] <= 60
    assert run["cleanup"]["export_s"] == 0
    # A one-hour job: the wait timed out twice (its queue limit, then one fallback period).
    assert run["timeouts"] <= 2
    assert "states:SendTaskSuccess" in outcome.calls[
        outcome.stack.resources["TrainingJobChangedFunction"]]


def test_a_lost_event_costs_at_most_one_janitor_interval(run_scenario):
    outcome = run_scenario("lost-events", janitor=True)

    run = outcome.execution
    assert run["status"] == "SUCCEEDED"
    # The janitor's pass found the wait's job SUCCEEDED and completed the wait, as the event
    # would have: not the wait's own timeout, a day on. (A pass may fall on the job's very
    # end, a lag of 0: which of the two ended the wait the calls below say.)
    assert 0 <= run["cleanup"]["lag_s"] <= JANITOR_INTERVAL_S + 60
    janitor = outcome.stack.resources["JanitorFunction"]
    assert "states:SendTaskSuccess" in outcome.calls[janitor]
    assert outcome.report["leaked_resources"] == []


def test_without_the_event_or_the_janitor_the_waits_timeout_checks_the_job(emulated):
    fallback_s = 2 * 3600
    emulator, deployment = emulated("lost-events",
                                    parameters={"JobEventFallbackSeconds": str(fallback_s)})
    upload_sample_dataset(emulator)
    emulator.client("s3").put_object(Bucket=DEMO_BUCKET, Key=DEFAULT_KEY,
                                     Body=manifest_body(SCENARIOS["lost-events"], None))

    run = finish(emulator, deployment, "TrainingRunStateMachineArn").execution

    assert run["status"] == "SUCCEEDED"
    assert JANITOR_INTERVAL_S < run["cleanup"]["lag_s"] <= fallback_s + 60


@pytest.mark.parametrize(("scenario", "attempts"), [("happy", 1), ("capacity-shrink", 3)])
def test_a_multi_day_run_stays_far_under_the_history_limit(run_scenario, monkeypatch, scenario,
                                                           attempts):
    days = 7
    monkeypatch.setattr(batch, "TRAINING_SECONDS", days * 24 * 3600)

    # A week on a slow clock skipped ahead: what a busy machine adds (seconds in which nobody
    # holds the clock) costs simulated seconds, not hours of extra polls.
    run = run_scenario(scenario, manifest={"timeouts": {"training_hours": days * 24 + 1}},
                       speed=1000, fast_forward=True).execution

    assert run["status"] == "SUCCEEDED"
    assert len(run["attempts"]) == attempts
    assert run["simulated_seconds"] > days * 24 * 3600
    # History grows only with the fallback checks: one a day, six events each.
    assert run["history_events"] <= 300 * attempts
    assert run["state_transitions"] * USD_PER_TRANSITION <= 0.002 * attempts
