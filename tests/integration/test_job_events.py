"""The TrainingRun waits for its training job on a task token that the job's state-change event
completes; without the event, a fallback check per timeout still notices the end."""

from __future__ import annotations

import pytest

from traingrid_local.emulator import batch

FALLBACK_S = 45 * 60  # the template's default JobEventFallbackSeconds
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


def test_a_lost_event_costs_at_most_one_fallback_timeout(run_scenario):
    outcome = run_scenario("lost-events")

    run = outcome.execution
    assert run["status"] == "SUCCEEDED"
    assert 5 < run["cleanup"]["lag_s"] <= FALLBACK_S + 60
    assert run["timeouts"] >= 2
    assert outcome.report["leaked_resources"] == []


@pytest.mark.parametrize(("scenario", "attempts"), [("happy", 1), ("capacity-shrink", 3)])
def test_a_multi_day_run_stays_far_under_the_history_limit(run_scenario, monkeypatch, scenario,
                                                           attempts):
    days = 7
    monkeypatch.setattr(batch, "TRAINING_SECONDS", days * 24 * 3600)

    run = run_scenario(scenario, manifest={"timeouts": {"training_hours": days * 24 + 1}},
                       speed=100_000).execution

    assert run["status"] == "SUCCEEDED"
    assert len(run["attempts"]) == attempts
    assert run["simulated_seconds"] > days * 24 * 3600
    # History grows only with the fallback checks: one per 45 minutes, six events each.
    assert run["history_events"] <= 5_000
    assert run["state_transitions"] * USD_PER_TRANSITION <= 0.01
