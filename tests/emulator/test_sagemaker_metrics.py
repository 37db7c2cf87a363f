"""SageMaker publishes a training job's metrics (its own MetricDefinitions matched against the
trainer's log lines) to CloudWatch in the job's region while it trains, and describes each
metric's latest value in FinalMetricDataList."""

from __future__ import annotations

import contextlib
import io
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from traingrid.campaigns.sagemaker_job import METRIC_DEFINITIONS
from traingrid_local.emulator import sagemaker_metrics
from traingrid_local.emulator.session import Emulator

from .helpers import skipping_idle_time, wait_until
from .test_sagemaker import _bucket, _client, _create, _describe

REGION = "eu-west-1"
MNP = Path(__file__).resolve().parents[2] / "containers" / "mnp"
# The trainer's window line (traingrid_trainer.train) as its first rank prints it.
WINDOW = ("[trainer rank 0/8] epoch 1/90 step 3/625 loss 6.1234 lr 0.01000 images/s 5000.0 "
          "(625.0 per GPU)")


def _series(emulator: Emulator, job: dict[str, Any], metric: str,
            dimension: tuple[str, str] | None = None) -> list[float]:
    """A metric's values by the job's name (as SageMaker publishes algorithm metrics), or by
    another ``dimension``."""
    name, value = dimension or ("TrainingJobName", job["TrainingJobName"])
    answer = _client(emulator, "cloudwatch", REGION).get_metric_data(
        MetricDataQueries=[{"Id": "m", "MetricStat": {"Metric": {
            "Namespace": "/aws/sagemaker/TrainingJobs", "MetricName": metric,
            "Dimensions": [{"Name": name, "Value": value}]},
            "Period": 60, "Stat": "Average"}}],
        StartTime=job["CreationTime"], EndTime=job["CreationTime"] + timedelta(days=1),
        ScanBy="TimestampAscending")
    return answer["MetricDataResults"][0]["Values"]


def test_a_jobs_metrics_reach_cloudwatch_as_it_trains(emulator: Emulator) -> None:
    _bucket(emulator, REGION)
    spec = {"TrainingImage": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/traingrid",
            "TrainingInputMode": "File", "MetricDefinitions": METRIC_DEFINITIONS}
    _create(emulator, "curves", REGION, AlgorithmSpecification=spec)

    wait_until(skipping_idle_time(lambda: (
        job := _describe(emulator, "curves", REGION))["SecondaryStatus"] == "Training"
        and _series(emulator, job, "train:loss")),
        what="the first points, while the job trains")
    ended = wait_until(skipping_idle_time(lambda: (
        job := _describe(emulator, "curves", REGION))["TrainingJobStatus"] == "Completed"
        and job), what="the job's end")

    loss = _series(emulator, ended, "train:loss")
    rates = _series(emulator, ended, "train:images_per_second")
    assert len(loss) == len(rates) > 60
    assert loss[0] > 5 and loss[-1] < 2  # ln(1000) falling towards 1
    # The whole job's images/s (2 hosts of 8 GPUs), as the trainer's first rank logs it.
    assert 0.95 * 16 * 625 < sorted(rates)[len(rates) // 2] < 1.05 * 16 * 625
    # Algorithm metrics are the job's, not a host's (Host is for the instances' own metrics).
    host = ("Host", f"{ended['TrainingJobName']}/algo-1")
    assert _series(emulator, ended, "train:loss", host) == []
    final = {m["MetricName"]: m["Value"] for m in ended["FinalMetricDataList"]}
    assert set(final) == {"train:loss", "train:images_per_second"}
    assert final["train:loss"] < 2


def test_sagemaker_takes_what_the_definitions_match() -> None:
    expected = {"train:loss": 6.1234, "train:images_per_second": 5000.0}
    assert sagemaker_metrics.matches(METRIC_DEFINITIONS, WINDOW) == expected
    # As SageMaker's toolkit has mpirun tag the first rank's lines (--tag-output; Open MPI 5
    # adds a space), and as the toolkit rewrites the tag where it reads the output itself.
    for tag in ("[1,0]<stdout>:", "[1,0]<stdout>: ", "[1,mpirank:0,algo-1]<stdout>:"):
        assert sagemaker_metrics.matches(METRIC_DEFINITIONS, tag + WINDOW) == expected
    assert sagemaker_metrics.matches([{"Name": "x", "Regex": "nothing ([0-9]+)"}],
                                     WINDOW) == {}


def refused_flag_line(value: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The line the trainer's own parser ends with when a hyperparameter's value is refused
    (it exits 2): argparse echoes the value."""
    monkeypatch.syspath_prepend(str(MNP))  # the node image's packages
    from traingrid_trainer.config import parser

    printed = io.StringIO()
    with contextlib.redirect_stderr(printed), pytest.raises(SystemExit):
        parser({}).parse_args(["--num_epochs", value])
    return printed.getvalue().splitlines()[-1]


@pytest.mark.parametrize("line", [
    "traingrid_train.py: error: argument --num_epochs: invalid int value: 'abc' loss: 9",
    "x loss 9 lr images/s 9 (",
    "[1,0]<stderr>:" + WINDOW,  # a rank's error output
    "[1,3]<stdout>:" + WINDOW,  # another rank's
    "[1,mpirank:3,algo-1]<stdout>:" + WINDOW,
    WINDOW.replace("rank 0/8", "rank 3/8"),
    "print: " + WINDOW,  # a script's own line, with the window's words in it
    WINDOW + " and more",
], ids=["argparse", "unanchored words", "stderr", "another rank's tag",
        "another rank's rewritten tag", "another rank", "inside a line", "a longer line"])
def test_no_other_line_is_a_metric(line: str) -> None:
    assert sagemaker_metrics.matches(METRIC_DEFINITIONS, line) == {}


def test_a_value_the_trainer_refuses_is_no_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    line = refused_flag_line("1 loss 9 lr 1 images/s 9 (9 per GPU)", monkeypatch)
    assert "invalid _positive value" in line and "loss 9 lr" in line, line
    for tag in ("", "[1,0]<stderr>:"):
        assert sagemaker_metrics.matches(METRIC_DEFINITIONS, tag + line) == {}
