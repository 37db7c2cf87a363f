"""Adaptation (moto 5.2.5): SageMaker publishes a training job's algorithm metrics to CloudWatch
while it trains, as AWS does.

SageMaker reads the training container's log with the job's ``MetricDefinitions`` (a name and a
regex each) and publishes every match to CloudWatch in the job's region: namespace
``/aws/sagemaker/TrainingJobs``, the definition's name as the metric, dimension
``TrainingJobName`` (as SageMaker's TrainingJobAnalytics reads them; ``Host`` is for the
instances' CPU, memory, GPU and disk metrics); DescribeTrainingJob's
``FinalMetricDataList`` gives each metric's latest value. moto does neither. Here, while a
simulated job (``emulator/sagemaker.py``) is Training, alarms write the lines the trainer's
first rank prints every logged window (``traingrid_trainer.train``: ``loss … lr … images/s …
(… per GPU)``, the whole job's images/s; SageMaker's mpirun gathers every rank's output on
algo-1), match the job's own MetricDefinitions against them and put the matches in moto's
CloudWatch of the job's region at the window's simulated time; ``FinalMetricDataList`` follows
the latest. A job stopped or failed while training has the points up to then.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from moto.cloudwatch.models import cloudwatch_backends
from moto.sagemaker.models import FakeTrainingJob, SageMakerModelBackend

from traingrid_local.emulator import sagemaker
from traingrid_local.emulator.alarms import ALARMS
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.patching import PATCHES
from traingrid_local.emulator.training_curves import (
    BASE_LR,
    IMAGES_PER_SECOND_PER_GPU,
    LIVE_WRITES,
    window_s,
)

NAMESPACE = "/aws/sagemaker/TrainingJobs"
DIMENSION = "TrainingJobName"


@dataclass
class Published:
    """What a job has put in CloudWatch so far."""

    seconds: float = 0.0  # of training, up to which the windows are published
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


# By job, beside it: whatever is in a job's __dict__ is in its description (and its events).
PUBLISHED: weakref.WeakKeyDictionary[FakeTrainingJob, Published] = weakref.WeakKeyDictionary()


def _number(job: FakeTrainingJob, name: str, default: int) -> int:
    raw = sagemaker._hyperparameter(job, name, str(default))
    return int(raw) if raw.isdigit() else default


def log_line(job: FakeTrainingJob, elapsed: float, training_seconds: float) -> str:
    """The trainer's line for the window ending ``elapsed`` seconds into training."""
    _, hosts = sagemaker._instances(job.resource_config)
    gpus = hosts * max(_number(job, "sagemaker_mpi_num_of_processes_per_host", 8), 1)
    epochs, batch = _number(job, "num_epochs", 90), _number(job, "batch_size", 256)
    warmup = min(_number(job, "warmup_epochs", 5), epochs)
    steps_per_epoch = max(1, 1_281_167 // (batch * gpus))
    epoch = epochs * elapsed / training_seconds
    wobble = 1 + (int(elapsed / window_s(training_seconds)) % 5 - 2) / 100
    peak = BASE_LR * gpus * batch / 256
    lr = (peak * epoch / warmup if epoch < warmup
          else peak * max(0.0, 1 - (epoch - warmup) / max(epochs - warmup, 1)) ** 2)
    loss = (math.log(1000) * math.exp(-3 * epoch / epochs) + 0.9) * wobble
    rate = gpus * IMAGES_PER_SECOND_PER_GPU * wobble
    step = int(epoch * steps_per_epoch)
    return (f"[trainer rank 0/{gpus}] epoch {min(int(epoch) + 1, epochs)}/{epochs} step "
            f"{step % steps_per_epoch + 1}/{steps_per_epoch} loss {loss:.4f} lr {lr:.5f} "
            f"images/s {rate:.1f} ({rate / gpus:.1f} per GPU)")


def matches(definitions: list[dict[str, str]], line: str) -> dict[str, float]:
    """What SageMaker takes from one log line: each definition's first group, as a number."""
    found = {}
    for definition in definitions:
        match = re.search(definition["Regex"], line)
        if match:
            try:
                found[definition["Name"]] = float(match.group(1))
            except (IndexError, ValueError):
                continue
    return found


def publish(job: FakeTrainingJob) -> None:
    """Put the windows trained since the last call in CloudWatch."""
    simulated = sagemaker.SIMULATED.get(job)
    published = PUBLISHED.get(job)
    if simulated is None or published is None:
        return
    training = next((p for p in simulated.phases() if p.status == "Training"), None)
    definitions = (job.algorithm_specification or {}).get("MetricDefinitions") or []
    if training is None or not definitions:
        return
    trained = (min(CLOCK.now(), training.end) - training.start).total_seconds()
    window = window_s(sagemaker.TRAINING_SECONDS)
    data: list[dict[str, Any]] = []
    with published.lock:
        elapsed = (math.floor(published.seconds / window) + 1) * window
        while elapsed <= trained + 1e-6:
            moment = sagemaker._naive(training.start + timedelta(seconds=elapsed))
            line = log_line(job, elapsed, sagemaker.TRAINING_SECONDS)
            for name, value in matches(definitions, line).items():
                data.append({"MetricName": name, "Value": value, "Timestamp": moment,
                             "Dimensions": [{"Name": DIMENSION,
                                             "Value": job.training_job_name}]})
                published.latest[name] = {"MetricName": name, "Value": value,
                                          "Timestamp": moment}
            published.seconds = elapsed
            elapsed += window
        if data:
            cloudwatch_backends[simulated.account_id][simulated.region].put_metric_data(
                NAMESPACE, data)
            sagemaker._describe_as(job, final_metric_data_list=list(published.latest.values()))


def follow(job: FakeTrainingJob) -> None:
    """Alarms through the job's training that publish what it has logged so far."""
    simulated = sagemaker.SIMULATED.get(job)
    if simulated is None:
        return
    training = next((p for p in simulated.phases() if p.status == "Training"), None)
    if training is None:  # fails before it trains
        return
    PUBLISHED[job] = Published()
    span = training.end - training.start
    for k in range(1, LIVE_WRITES + 1):
        ALARMS.at(training.start + span * k / (LIVE_WRITES + 1), lambda: publish(job))
    ALARMS.at(training.end, lambda: publish(job))


def _create(previous: Callable[..., FakeTrainingJob]) -> Callable[..., FakeTrainingJob]:
    def create_training_job(self: SageMakerModelBackend, training_job_name: str,
                            **request: Any) -> FakeTrainingJob:
        job = previous(self, training_job_name, **request)
        follow(job)
        return job

    return create_training_job


def _stop(previous: Callable[..., None]) -> Callable[..., None]:
    def stop_training_job(self: SageMakerModelBackend, training_job_name: str) -> None:
        previous(self, training_job_name)
        job = self.training_jobs[training_job_name]
        publish(job)  # what it trained until the stop
        simulated = sagemaker.SIMULATED.get(job)
        if simulated is not None:
            ALARMS.at(simulated.phases()[-1].end, lambda: publish(job))

    return stop_training_job


def apply() -> None:
    PATCHES.wrap(SageMakerModelBackend, "create_training_job", _create)
    PATCHES.wrap(SageMakerModelBackend, "stop_training_job", _stop)
