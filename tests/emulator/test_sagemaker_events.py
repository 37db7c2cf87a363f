"""SageMaker announces each training job's end on its region's default bus ("SageMaker
Training Job State Change"), once, at the job's own simulated moment, whether or not anyone
describes the job; a stopped job announces Stopped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from traingrid_local.emulator import sagemaker
from traingrid_local.emulator.session import Emulator

from .helpers import skipping_idle_time, wait_until
from .test_sagemaker import _bucket, _create

REGION = "eu-central-1"


def _watch(emulator: Emulator) -> Any:
    """A rule in REGION that starts a (do-nothing) execution for each of SageMaker's
    training-job end events; returns a probe for the events received so far."""
    from .helpers import create_role

    sfn, events = emulator.client("stepfunctions", REGION), emulator.client("events", REGION)
    machine = sfn.create_state_machine(
        name="received", roleArn=create_role(emulator, "received", "states.amazonaws.com"),
        definition=json.dumps({"StartAt": "Got", "States": {"Got": {"Type": "Pass",
                                                                   "End": True}}}),
    )["stateMachineArn"]
    events.put_rule(Name="training-jobs", EventPattern=json.dumps({
        "source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"],
        "detail": {"TrainingJobStatus": ["Completed", "Failed", "Stopped"]}}))
    events.put_targets(Rule="training-jobs", Targets=[{"Id": "machine", "Arn": machine}])

    def received() -> list[dict[str, Any]]:
        return [json.loads(sfn.describe_execution(executionArn=e["executionArn"])["input"])
                for e in sfn.list_executions(stateMachineArn=machine)["executions"]]

    return received


@pytest.fixture
def short_training(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sagemaker, "TRAINING_SECONDS", 3 * 86400)


def test_a_job_announces_its_end_once_without_being_described(
        emulator: Emulator, short_training: None) -> None:
    received = _watch(emulator)
    _bucket(emulator, REGION)
    arn = _create(emulator, "three-days", REGION, Tags=[{"Key": "traingrid:run", "Value": "r1"}])

    (event,) = wait_until(skipping_idle_time(received),
                          what="the job's end to be announced")

    assert (event["source"], event["detail-type"], event["region"]) == (
        "aws.sagemaker", "SageMaker Training Job State Change", REGION)
    assert event["resources"] == [arn]
    detail = event["detail"]
    assert (detail["TrainingJobArn"], detail["TrainingJobStatus"]) == (arn, "Completed")
    assert detail["ModelArtifacts"]["S3ModelArtifacts"].endswith("/three-days/output/model.tar.gz")
    assert detail["Tags"] == {"traingrid:run": "r1"}
    assert isinstance(detail["TrainingEndTime"], int)  # epoch milliseconds, as AWS sends
    assert len(received()) == 1  # once


def test_a_stopped_job_announces_stopped(emulator: Emulator, short_training: None) -> None:
    received = _watch(emulator)
    _bucket(emulator, REGION)
    _create(emulator, "stopped", REGION)
    emulator.client("sagemaker", REGION).stop_training_job(TrainingJobName="stopped")

    (event,) = wait_until(skipping_idle_time(received),
                          what="the stop to be announced")

    assert event["detail"]["TrainingJobStatus"] == "Stopped"
