"""What the API shows of a run: built from DescribeExecution and the execution's history.

Pure functions of what Step Functions returns, so they are tested without AWS.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from traingrid import clock
from traingrid.runs.timeline import timeline
from traingrid.training.plan import archive_prefix

TRAINING_RUN = "TrainingRun"
CAMPAIGN_FANOUT = "CampaignFanout"


def region_of(arn: str) -> str:
    return arn.split(":")[3]


def console_url(execution_arn: str) -> str:
    """The execution's page in the Step Functions console (graph, events, input and output)."""
    region = region_of(execution_arn)
    return (f"https://{region}.console.aws.amazon.com/states/home?region={region}"
            f"#/v2/executions/details/{execution_arn}")


def _iso(moment: datetime | None) -> str | None:
    return clock.iso(moment) if moment else None


def summary(pipeline: str, execution: dict[str, Any]) -> dict[str, Any]:
    """A run in a list: ListExecutions' or DescribeExecution's fields, JSON-ready."""
    stopped = execution.get("stopDate")
    return {
        "name": execution["name"],
        "pipeline": pipeline,
        "status": execution["status"],
        "started_at": _iso(execution["startDate"]),
        "stopped_at": _iso(stopped),
        "duration_s": round(
            ((stopped or clock.service_now()) - execution["startDate"]).total_seconds(), 3),
        "execution_arn": execution["executionArn"],
        "console_url": console_url(execution["executionArn"]),
    }


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def artifacts(pipeline: str, name: str, output: Any, data_bucket: str) -> list[dict[str, Any]]:
    """Where a run's results are: the archive (TrainingRun) or each region's model."""
    if pipeline == TRAINING_RUN:
        found: dict[str, Any] = {"location": f"s3://{data_bucket}/{archive_prefix(name)}"}
        if isinstance(output, dict) and output.get("manifest"):
            found |= {"manifest": output["manifest"], "objects": output.get("objects"),
                      "bytes": output.get("bytes")}
        return [found]
    jobs = output.get("jobs", []) if isinstance(output, dict) else []
    return [{"region": job.get("region"), "requested_region": job.get("requested_region"),
             "location": job["artifacts"]}
            for job in jobs if isinstance(job, dict) and job.get("artifacts")]


def current_state(events: list[dict[str, Any]]) -> str | None:
    for event in reversed(events):
        if event["type"].endswith("StateEntered"):
            return event["stateEnteredEventDetails"]["name"]
    return None


def run_view(pipeline: str, description: dict[str, Any], events: list[dict[str, Any]],
             data_bucket: str) -> dict[str, Any]:
    """Everything about one run: status, where it is, how long each state took, why it failed
    and where its results are."""
    view = summary(pipeline, description)
    output = _json(description.get("output"))
    ended = description.get("stopDate") or clock.service_now()
    states, earlier = timeline(events, description["startDate"], description["status"], ended)
    view |= {
        "current_state": current_state(events),
        "error": description.get("error"),
        "cause": description.get("cause"),
        "input": _json(description.get("input")),
        "output": output,
        "artifacts": artifacts(pipeline, description["name"], output, data_bucket),
        "states": states,
    }
    if earlier:
        view["states_omitted"] = earlier
    return view
