"""TrainGrid's events on the default bus (traingrid.aws.events): PutEvents' limits checked
before sending, more than ten events sent in batches, and a rule on the default bus receives
each; a run-status change that cannot be published never fails the step."""

from __future__ import annotations

import json

import pytest

from traingrid.aws import events
from traingrid.notifications import run_status
from traingrid_local.emulator.session import Emulator
from traingrid_local.stack import run_events

ARN = "arn:aws:states:us-east-1:123456789012:execution:TrainingRun-abc:run-{}"


def test_twelve_changes_reach_a_rule_on_the_default_bus() -> None:
    with Emulator() as emulator:
        run_events.observe(emulator)
        changes = [run_status.change("TrainingRun", ARN.format(i), "RUNNING", nodes=2)
                   for i in range(12)]
        assert run_status.publish(changes) == 12  # two PutEvents calls: at most 10 each
        received = run_events.published(emulator)
    assert sorted(e["detail"]["name"] for e in received) == sorted(
        f"run-{i}" for i in range(12))
    assert {(e["source"], e["detail-type"]) for e in received} == {
        ("traingrid", "TrainGrid Run Status Change")}


def test_what_eventbridge_would_refuse_is_refused_before_sending() -> None:
    with pytest.raises(ValueError, match="larger than 256 KB"):
        events.put("traingrid", "TrainGrid Run Status Change",
                   [({"cause": "x" * 256 * 1024}, [])])
    with pytest.raises(ValueError, match="DetailType"):
        events.put("traingrid", "x" * 129, [({}, [])])
    long = run_status.change("TrainingRun", ARN.format(1), "FAILED", cause="y" * 100_000)
    assert len(long["cause"]) == run_status.MAX_CAUSE
    assert len(json.dumps(long)) < 10_000


def test_a_change_that_cannot_be_published_is_counted_not_raised(monkeypatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> int:
        raise events.AwsServiceError("EventBridge", "PutEvents", "AccessDenied", "no")

    monkeypatch.setattr(events, "put", refuse)
    change = run_status.change("CampaignFanout", ARN.format(2), "SUCCEEDED")
    assert run_status.publish([change]) == 0
