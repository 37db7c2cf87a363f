"""CloudWatch metrics, read in whichever region they were published."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from traingrid.aws.client_errors import translated
from traingrid.aws.clients import client


def metric_data(region: str, queries: list[dict[str, Any]], start: datetime,
                end: datetime) -> dict[str, list[list[float]]]:
    """Each query's points, by its Id, oldest first: ``[[t, value], ...]``, t in Unix seconds
    (GetMetricData, every page)."""
    found: dict[str, list[list[float]]] = {q["Id"]: [] for q in queries}
    with translated("CloudWatch", "GetMetricData"):
        pages = client("cloudwatch", region).get_paginator("get_metric_data").paginate(
            MetricDataQueries=queries, StartTime=start, EndTime=end,
            ScanBy="TimestampAscending")
        for page in pages:
            for result in page["MetricDataResults"]:
                found[result["Id"]] += [[moment.timestamp(), value] for moment, value in
                                        zip(result["Timestamps"], result["Values"], strict=True)]
    for points in found.values():
        points.sort()
    return found
