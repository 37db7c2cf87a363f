"""What the API shows of a run: built from DescribeExecution and the execution's history.

Pure functions of what Step Functions returns, so they are tested without AWS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from traingrid import clock
from traingrid.costs import receipt
from traingrid.runs.timeline import by_state, timeline, visits
from traingrid.training.plan import archive_prefix
from traingrid.vocabulary.statuses import RunStatus

TRAINING_RUN = "TrainingRun"
CAMPAIGN_FANOUT = "CampaignFanout"
# The trigger's field naming the run a re-run re-runs (``runs.rerun``).
RERUN_OF = "rerun_of"
# What a region's job shows of itself while the fan-out runs (its branch's state is larger).
REGION_JOB_FIELDS = ("region", "requested_region", "status", "instance_type", "instance_count",
                     "estimated_usd", "placement_reason", "tried", "moves", "reason", "cause",
                     "job_name")



# A cancelled run's execution error; its cause names who and when (runs/cancel.py writes it).
CANCELLED_ERROR = "TrainGrid.Cancelled"
_CANCELLED_CAUSE = re.compile(
    r"Cancelled by (?P<by>.+) at (?P<at>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\. ")


def cancellation(error: str | None, cause: str | None) -> dict[str, str] | None:
    """``{"by", "at"}`` of a run that was cancelled (from its execution's error and cause);
    None for any other run."""
    if error != CANCELLED_ERROR or not cause:
        return None
    found = _CANCELLED_CAUSE.match(cause)
    return {"by": found["by"], "at": found["at"]} if found else None


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


def rerun_of(execution_input: Any) -> str | None:
    """The run this one re-runs, from its execution input's trigger; None if it is none."""
    trigger = execution_input.get("trigger") if isinstance(execution_input, dict) else None
    found = trigger.get(RERUN_OF) if isinstance(trigger, dict) else None
    return found if isinstance(found, str) else None


def current_state(events: list[dict[str, Any]]) -> str | None:
    for event in reversed(events):
        if event["type"].endswith("StateEntered"):
            return event["stateEnteredEventDetails"]["name"]
    return None


def _exits(events: list[dict[str, Any]], states: tuple[str, ...] | None = None
           ) -> list[tuple[str, Any]]:
    """(state, output) of every state exit (of ``states`` only, if given), oldest first."""
    found = []
    for event in events:
        details = event.get("stateExitedEventDetails")
        if details and (states is None or details["name"] in states):
            found.append((details["name"], _json(details.get("output"))))
    return found


def _plan(events: list[dict[str, Any]], states: tuple[str, ...]) -> dict[str, Any]:
    """The ``plan`` that the planning states (``Plan`` and its ``MeasureDataset`` loop,
    ``PlanFanout``) added to the run: the finished one, not a measurement in progress."""
    for _, output in _exits(events, states):
        plan = output.get("plan") if isinstance(output, dict) else None
        if isinstance(plan, dict) and "measuring" not in plan:
            return plan
    return {}


def branch_executions(events: list[dict[str, Any]]) -> list[str]:
    """The ARNs of a fan-out's region branches (CampaignRegion executions), from the
    ``startExecution.sync:2`` tasks that started them; while it runs, each region's job is
    in its branch's history, not in the fan-out's."""
    found = []
    for event in events:
        details = event.get("taskSubmittedEventDetails")
        if details and details.get("resource", "").startswith("startExecution"):
            submitted = _json(details.get("output"))
            if isinstance(submitted, dict) and isinstance(submitted.get("ExecutionArn"), str):
                found.append(submitted["ExecutionArn"])
    return found


def region_jobs(output: Any, events: list[dict[str, Any]], planned: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """Each region's job of a fan-out as it stands: each branch's latest from its ``planned``
    job on (``events``: the fan-out's history and its branches'), and once the run has ended,
    the final ones (over their plans)."""
    latest: dict[str, dict[str, Any]] = {}
    for job in planned:
        latest[job["requested_region"]] = {**job, "status": "Planned"}
    if isinstance(output, dict) and isinstance(output.get("jobs"), list):
        ended = [job for job in output["jobs"] if isinstance(job, dict)]
        jobs = [latest.get(str(job.get("requested_region")), {}) | job for job in ended]
    else:
        for _, exited in _exits(events):
            branch = exited.get("job") if isinstance(exited, dict) else None
            if isinstance(branch, dict) and branch.get("requested_region") in latest:
                latest[branch["requested_region"]] = branch
        jobs = list(latest.values())
    return [{key: job[key] for key in REGION_JOB_FIELDS if key in job} for job in jobs]


def fanout_jobs(description: dict[str, Any], events: list[dict[str, Any]]
                ) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """A fan-out's planned jobs (with their fallback regions), and each data region's job as
    its branch last reported it (``region_jobs``), by data region."""
    planned = _plan(events, ("PlanFanout",)).get("jobs", [])
    current = region_jobs(_json(description.get("output")), events, planned)
    return planned, {str(job["requested_region"]): job for job in current
                     if "requested_region" in job}


def estimate(pipeline: str, output: Any, plan: dict[str, Any]) -> dict[str, Any] | None:
    """What the run is expected to cost, from its plan (known from its first step on)."""
    if pipeline == TRAINING_RUN:
        if isinstance(output, dict) and isinstance(output.get("estimate"), dict):
            return dict(output["estimate"])
        return plan.get("estimate")
    planned = plan.get("jobs")
    if not planned:
        return None
    return {"usd_per_hour": round(sum(j.get("usd_per_hour", 0) for j in planned), 2),
            "estimated_usd": round(sum(j.get("estimated_usd", 0) for j in planned), 2)}


DescribeJobs = Callable[[list[str]], list[dict[str, Any]]]


def cost(pipeline: str, description: dict[str, Any], events: list[dict[str, Any]],
         estimated: dict[str, Any] | None,
         seconds: Callable[[datetime, datetime], float] | None = None,
         describe_jobs: DescribeJobs | None = None,
         recorded: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the run has cost so far (``costs.receipt``), beside its estimate; with
    ``describe_jobs`` (Batch's DescribeJobs), each attempt's time (and its wait in the queue)
    from its job's own timestamps. An ended fan-out's regions are priced as its run
    ``recorded`` them (the campaign run's ``cost``): without calls to their regions. A
    TrainingRun's record step records the receipt this gives once the run has ended."""
    running = description["status"] == RunStatus.RUNNING
    ended = description.get("stopDate") or clock.service_now()
    if pipeline == TRAINING_RUN:
        return receipt.training_run_cost(
            events, ended, running, estimated, seconds or clock.service_seconds, describe_jobs,
            int(clock.now().timestamp() * 1000))
    usage = receipt.fanout_usage(events, _json(description.get("output")), running)
    if not running and recorded and isinstance(recorded.get("regions"), dict):
        usage = usage.with_regions(receipt.recorded_regions(recorded["regions"]))
    return receipt.receipt(usage, estimated)


def run_view(pipeline: str, description: dict[str, Any], events: list[dict[str, Any]],
             data_bucket: str, describe_jobs: DescribeJobs | None = None,
             recorded_cost: dict[str, Any] | None = None,
             branch_events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Everything about one run: status, where it is, how long each state took, why it failed
    and where its results are; a fan-out's region jobs also from its branches' histories
    (``branch_events``)."""
    view = summary(pipeline, description)
    output = _json(description.get("output"))
    ended = description.get("stopDate") or clock.service_now()
    found = visits(events)
    states, earlier = timeline(found, description["startDate"], description["status"], ended)
    plan = _plan(events, ("Plan", "MeasureDataset") if pipeline == TRAINING_RUN
                 else ("PlanFanout",))
    view |= {
        "current_state": current_state(events),
        "error": description.get("error"),
        "cause": description.get("cause"),
        "cancelled": cancellation(description.get("error"), description.get("cause")),
        "input": _json(description.get("input")),
        "output": output,
        "artifacts": artifacts(pipeline, description["name"], output, data_bucket),
        "states": states,
        "by_state": by_state(found, description["status"]),
        "estimate": estimate(pipeline, output, plan),
    }
    view[RERUN_OF] = rerun_of(view["input"])
    view["cost"] = cost(pipeline, description, events, view["estimate"],
                        describe_jobs=describe_jobs, recorded=recorded_cost)
    if pipeline == CAMPAIGN_FANOUT:
        view["jobs"] = region_jobs(output, events + (branch_events or []),
                                   plan.get("jobs", []))
    if earlier:
        view["states_omitted"] = earlier
    return view
