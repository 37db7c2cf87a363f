"""Adaptation (moto 5.2.5): SageMaker announces a training job's end on its region's default
event bus, as a "SageMaker Training Job State Change" event, as AWS does.

SageMaker "sends service events directly to EventBridge" (EventBridge Events Reference,
"Amazon SageMaker AI events"); the event's ``detail`` is the job as DescribeTrainingJob
describes it (``TrainingJobName``, ``TrainingJobArn``, ``TrainingJobStatus``,
``SecondaryStatus``, ``FailureReason``, ``ModelArtifacts``, ``Tags`` …), with times in epoch
milliseconds, ``source`` ``aws.sagemaker``, ``resources`` the job's ARN. SageMaker "may send
multiple events to EventBridge for each state change": whoever reads them must not mind a
repeat. moto sends none. Here each simulated job (``emulator/sagemaker.py``) announces its end
(Completed, Failed, Stopped) once, at its own simulated moment (an alarm): an alarm at its
planned end when it is created, another at its new end when it is stopped. The
``lost-events`` fault drops them, as it drops Batch's.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from moto.sagemaker.models import FakeTrainingJob, SageMakerModelBackend

from traingrid_local.emulator import events, fault_injection, sagemaker, sfn_events
from traingrid_local.emulator.alarms import ALARMS
from traingrid_local.emulator.patching import PATCHES

DETAIL_TYPE = "SageMaker Training Job State Change"
_ANNOUNCED: set[str] = set()
_LOCK = threading.Lock()


def _epoch_ms(value: Any) -> Any:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000) if value.tzinfo else int(
            (value - datetime(1970, 1, 1)).total_seconds() * 1000)
    if isinstance(value, dict):
        return {key: _epoch_ms(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_epoch_ms(item) for item in value]
    return value


def detail(job: FakeTrainingJob) -> dict[str, Any]:
    described = _epoch_ms(job.response_object)
    described["Tags"] = {tag["Key"]: tag["Value"] for tag in (getattr(job, "tags", None) or [])}
    return described


def announce(job: FakeTrainingJob) -> None:
    """The job's end, once, if it has ended."""
    simulated = sagemaker.SIMULATED.get(job)
    if simulated is None or not sfn_events.ENABLED:
        return
    status = simulated.advance(job)
    if status not in sagemaker.TERMINAL:
        return
    with _LOCK:
        if job.arn in _ANNOUNCED:
            return
        _ANNOUNCED.add(job.arn)
    if fault_injection.CURRENT.on("lost-events"):
        return
    events.emit(simulated.account_id, simulated.region, "aws.sagemaker", DETAIL_TYPE,
                detail(job), [job.arn])


def _at_its_end(job: FakeTrainingJob) -> None:
    simulated = sagemaker.SIMULATED.get(job)
    if simulated is not None:
        ALARMS.at(simulated.phases()[-1].end, lambda: announce(job))


def _create(previous: Callable[..., FakeTrainingJob]) -> Callable[..., FakeTrainingJob]:
    def create_training_job(self: SageMakerModelBackend, training_job_name: str,
                            **request: Any) -> FakeTrainingJob:
        job = previous(self, training_job_name, **request)
        _at_its_end(job)
        return job

    return create_training_job


def _stop(previous: Callable[..., None]) -> Callable[..., None]:
    def stop_training_job(self: SageMakerModelBackend, training_job_name: str) -> None:
        previous(self, training_job_name)
        _at_its_end(self.training_jobs[training_job_name])

    return stop_training_job


def apply() -> None:
    # A fresh record each session (job names come back in the next one).
    PATCHES.replace(sys.modules[__name__], "_ANNOUNCED", set())
    PATCHES.wrap(SageMakerModelBackend, "create_training_job", _create)
    PATCHES.wrap(SageMakerModelBackend, "stop_training_job", _stop)
