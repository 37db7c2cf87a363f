"""A fan-out's curves by region, as ``GET /runs/{name}/metrics`` answers: what SageMaker
records of each region's job.

SageMaker matches the job's ``MetricDefinitions`` (``sagemaker_job.METRIC_DEFINITIONS``)
against its log and publishes every match to CloudWatch in the job's region, namespace
``/aws/sagemaker/TrainingJobs``, dimension ``TrainingJobName`` (``Host`` ``<job>/algo-<k>`` is
for the instances' own metrics: CPU, memory, GPU, disk), while the job trains;
DescribeTrainingJob's ``FinalMetricDataList`` gives each metric's latest value. The trainer's
first rank logs the whole job's figures, and SageMaker's mpirun gathers every rank's output on
algo-1, so a region's curves are the job's: the loss and the job's images/s. They are read in
the job's region (GetMetricData), in bins of a whole number of minutes (SageMaker's metrics are
standard resolution), for as long as CloudWatch keeps them (15 days at 1 minute, 63 days at
5 minutes, 455 days at an hour). The TensorBoard files SageMaker uploads are named, not read.

A region's job is the one its branch reported (an ended branch), else the newest of the
fan-out's jobs for that data region in the regions it may train in (ListTrainingJobs by name:
``naming.job_name`` of each attempt); a region whose job has not started has none yet.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from traingrid.errors import AwsServiceError, ResourceNotFound
from traingrid.naming import job_name

NAMESPACE = "/aws/sagemaker/TrainingJobs"
DIMENSION = "TrainingJobName"  # as SageMaker's own TrainingJobAnalytics reads them
# Each of the job's MetricDefinitions (campaigns.sagemaker_job.METRIC_DEFINITIONS, tested) as
# a field of the answer (metrics.FIELDS).
METRIC_FIELDS = {"train:loss": "loss", "train:images_per_second": "images_per_s"}
PERIOD_UNIT_S = 60  # standard resolution: a period is a multiple of 60 seconds
MAX_ATTEMPTS = 20  # attempt numbers tried when a job's name is matched to its data region

Describe = Callable[[str, str], dict[str, Any]]  # (region, job name) → DescribeTrainingJob
ListNamed = Callable[[str, str], list[dict[str, Any]]]  # (region, name part) → summaries
MetricData = Callable[[str, list[dict[str, Any]], datetime, datetime],
                      dict[str, list[list[float]]]]


def period(step: int) -> int:
    """CloudWatch's period for bins of ``step`` seconds: a whole number of minutes."""
    return max(1, math.ceil(step / PERIOD_UNIT_S)) * PERIOD_UNIT_S


def current_job(execution: str, planned: Mapping[str, Any], reported: Mapping[str, Any] | None,
                list_named: ListNamed) -> tuple[str, str] | None:
    """(region, job name) of a data region's job: the one its branch reported, else the newest
    of its attempts in the regions it may train in; None if none has started."""
    if reported and reported.get("job_name") and reported.get("region"):
        return str(reported["region"]), str(reported["job_name"])
    data_region = str(planned["requested_region"])
    names = {job_name(execution, data_region, attempt) for attempt in range(1, MAX_ATTEMPTS + 1)}
    common = job_name(execution, data_region, 1).removesuffix("-1")
    found: list[tuple[datetime, str, str]] = []
    for region in dict.fromkeys([planned["region"], *planned.get("fallbacks", [])]):
        found += [(job["CreationTime"], str(region), job["TrainingJobName"])
                  for job in list_named(str(region), common) if job["TrainingJobName"] in names]
    if not found:
        return None
    _, region, name = max(found)
    return region, name


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def window(description: Mapping[str, Any], now: datetime) -> tuple[datetime, datetime]:
    """The span of a job's points: from its training's start (its creation before) to its
    end, or now."""
    start = description.get("TrainingStartTime") or description["CreationTime"]
    end = description.get("TrainingEndTime") or now
    return _utc(start), _utc(end)


def queries(name: str, step: int) -> list[dict[str, Any]]:
    """GetMetricData's queries of a job's metrics, by field."""
    return [{"Id": field, "ReturnData": True, "MetricStat": {
        "Metric": {"Namespace": NAMESPACE, "MetricName": metric,
                   "Dimensions": [{"Name": DIMENSION, "Value": name}]},
        "Period": period(step), "Stat": "Average"}} for metric, field in METRIC_FIELDS.items()]


def region_answer(region: str, name: str, description: Mapping[str, Any],
                  points: Mapping[str, list[list[float]]]) -> dict[str, Any]:
    """One region's entry: its job, what SageMaker says of it, its curves."""
    final = {METRIC_FIELDS[m["MetricName"]]: round(float(m["Value"]), 6)
             for m in description.get("FinalMetricDataList") or []
             if m.get("MetricName") in METRIC_FIELDS}
    tensorboard = (description.get("TensorBoardOutputConfig") or {}).get("S3OutputPath")
    return {"region": region, "job_name": name, "status": description["TrainingJobStatus"],
            "source": f"cloudwatch:{region}:{NAMESPACE}:{DIMENSION}={name}",
            **{field: [[t, round(v, 6)] for t, v in series]
               for field, series in points.items() if series},
            "final": final, "tensorboard": tensorboard}


def fanout_regions(execution: str, planned: Sequence[Mapping[str, Any]],
                   reported: Mapping[str, Mapping[str, Any]], bins: Callable[[float], int],
                   low: datetime | None, high: datetime | None, now: datetime,
                   describe: Describe, list_named: ListNamed,
                   metric_data: MetricData) -> tuple[int, dict[str, dict[str, Any]]]:
    """The bins' seconds (``bins`` of the jobs' span, in whole minutes) and each data region's
    entry (``region_answer``), by data region, with the points within [``low``, ``high``]."""
    regions: dict[str, dict[str, Any]] = {}
    jobs: dict[str, tuple[str, str, dict[str, Any], datetime, datetime]] = {}
    for job in planned:
        data_region = str(job["requested_region"])
        try:
            found = current_job(execution, job, reported.get(data_region), list_named)
        except (ResourceNotFound, AwsServiceError) as error:
            regions[data_region] = {"region": job["region"], "job_name": None,
                                    "status": "Unknown", "error": str(error), "final": {},
                                    "tensorboard": None}
            continue
        if found is None:
            regions[data_region] = {"region": job["region"], "job_name": None,
                                    "status": "NotStarted", "final": {}, "tensorboard": None}
            continue
        region, name = found
        try:
            description = describe(region, name)
        except (ResourceNotFound, AwsServiceError) as error:
            # A refused attempt's name (its job never existed), or the region unreadable now:
            # this region's entry says so; the others are answered.
            regions[data_region] = {"region": region, "job_name": name, "status": "Unknown",
                                    "error": str(error), "final": {}, "tensorboard": None}
            continue
        start, end = window(description, now)
        jobs[data_region] = (region, name, description, max(start, low or start),
                             min(end, high or end))
    spans = [(start, end) for *_, start, end in jobs.values() if end > start]
    step = period(bins((max(e for _, e in spans) - min(s for s, _ in spans)).total_seconds()
                       if spans else 0.0))
    for data_region, (region, name, description, start, end) in jobs.items():
        points: dict[str, list[list[float]]] = {}
        if end > start:
            # CloudWatch stamps each bin at its start, counted from StartTime: a StartTime on a
            # multiple of the period puts the bins where a TrainingRun's are (and is what
            # CloudWatch advises, GetMetricData's StartTime); the last bin starts before the end.
            aligned = datetime.fromtimestamp(start.timestamp() // step * step, UTC)
            try:
                points = metric_data(region, queries(name, step), aligned,
                                     end if high else end + timedelta(seconds=step))
            except (ResourceNotFound, AwsServiceError) as error:
                regions[data_region] = region_answer(region, name, description, {}) | {
                    "error": f"curves not read: {error}"}
                continue
        regions[data_region] = region_answer(region, name, description, points)
    return step, dict(sorted(regions.items()))
