"""What happened in the emulated account: executions, artifacts, and any resource left behind."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from traingrid.costs import receipt, region_usage
from traingrid.costs.receipt import latest_state
from traingrid.db.engine import transaction
from traingrid.db.repositories import TrainingRunRepository
from traingrid.runs import view
from traingrid.training.outcome import nodes_used
from traingrid.vocabulary.campaign_fanout import LIVE_REGION_JOB_STATUSES
from traingrid_local.emulator import lambda_inprocess
from traingrid_local.emulator.deploy import Stack
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator
from traingrid_local.stack import run_events, sample_campaign
from traingrid_local.stack.environment import Deployment

LIVE_JOB_STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING")
# A task's success: a service integration's, or a Lambda function's called by its ARN.
SUCCEEDED_DETAILS = {"TaskSucceeded": "taskSucceededEventDetails",
                     "LambdaFunctionSucceeded": "lambdaFunctionSucceededEventDetails"}


def history(emulator: Emulator, execution_arn: str) -> list[dict[str, Any]]:
    sfn = emulator.client("stepfunctions")
    events, token = [], None
    while True:
        page = sfn.get_execution_history(
            executionArn=execution_arn, maxResults=1000, **({"nextToken": token} if token else {})
        )
        events += page["events"]
        token = page.get("nextToken")
        if not token:
            return events


def current_state(events: list[dict[str, Any]]) -> str | None:
    for event in reversed(events):
        if event["type"].endswith("StateEntered"):
            return event["stateEnteredEventDetails"]["name"]
    return None


def _entered(emulator: Emulator, events: list[dict[str, Any]], state: str) -> float | None:
    """Simulated epoch seconds when the execution first entered ``state``."""
    for event in events:
        details = event.get("stateEnteredEventDetails")
        if details and details["name"] == state:
            return emulator.simulated_seconds_at(event["timestamp"])
    return None


def _task_output(events: list[dict[str, Any]], state: str,
                 last: bool = False) -> dict[str, Any] | None:
    """The output of the first (or ``last``) successful task of ``state``."""
    scheduled = {e["id"] for e in events if e["type"] == "TaskStateEntered"
                 and e["stateEnteredEventDetails"]["name"] == state}
    inside, found = False, None
    for event in events:
        if event["id"] in scheduled:
            inside = True
        elif event["type"].endswith("StateEntered"):
            inside = False  # that visit ended without success
        elif inside and event["type"] in SUCCEEDED_DETAILS:
            found = json.loads(event[SUCCEEDED_DETAILS[event["type"]]]["output"])
            if not last:
                return found
    return found


def cleanup(emulator: Emulator, events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Cleanup lag: simulated seconds from the last training job's terminal state to the file
    system's deletion, with the part until the run acted on the job's end (``noticed_s``) and
    the export task's (``export_s``, 0 when the job archived its outputs itself). None if the
    job never ran to an end or the file system was not deleted."""
    submitted = (_task_output(events, "SubmitTrainingJob", last=True)  # on ECS, or EKS
                 or _task_output(events, "SubmitTrainingPods", last=True))
    deleted_at = _entered(emulator, events, "DeleteFileSystem")
    if submitted is None or deleted_at is None:
        return None
    job = emulator.client("batch").describe_jobs(jobs=[submitted["JobId"]])["jobs"][0]
    if "stoppedAt" not in job:
        return None
    ended_at = job["stoppedAt"] / 1000
    acted_at = min((t for t in (_entered(emulator, events, state) for state in
                                ("CheckArchive", "StartExport")) if t is not None),
                   default=deleted_at)
    export_s = 0.0
    if (export := _task_output(events, "StartExport")) is not None:
        task = emulator.client("fsx").describe_data_repository_tasks(
            TaskIds=[export["DataRepositoryTask"]["TaskId"]])["DataRepositoryTasks"][0]
        started = task["CreationTime"].timestamp()
        export_s = (task["EndTime"].timestamp() if "EndTime" in task else deleted_at) - started
    return {
        "lag_s": round(deleted_at - ended_at, 1),
        "noticed_s": round(acted_at - ended_at, 1),
        "export_s": round(export_s, 1),
    }


def last_state(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The execution's state, with its plan, as it entered the last state that had one (the
    final Summarize leaves only the run's summary)."""
    for event in reversed(events):
        details = event.get("stateEnteredEventDetails")
        if details and details.get("input"):
            state = json.loads(details["input"])
            if isinstance(state, dict) and "plan" in state:
                return state
    return {}


def training_attempts(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A TrainingRun's nodes asked for, the nodes its last attempt trained on (None: none
    got nodes) and every attempt: ``{nodes, reason, resumed_from, job_id, outcome}``."""
    state = last_state(events)
    planned = (state.get("plan") or {}).get("job") or {}
    request = state.get("request") or {}
    return {
        "nodes_requested": planned.get("requested_nodes", request.get("nodes")),
        "nodes_used": nodes_used(planned, state.get("job") or {}) if planned else None,
        "attempts": planned.get("attempts", []),
    }


def execution_entry(emulator: Emulator, stack: Stack, execution_arn: str,
                    events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    sfn = emulator.client("stepfunctions")
    described = sfn.describe_execution(executionArn=execution_arn)
    events = history(emulator, execution_arn) if events is None else events
    machines = stack.state_machine_names()
    end = described.get("stopDate") or events[-1]["timestamp"]
    output = json.loads(described["output"]) if described.get("output") else None
    return {
        "name": described["name"],
        "state_machine": machines.get(described["stateMachineArn"], described["stateMachineArn"]),
        "status": described["status"],
        "error": described.get("error"),
        "cause": described.get("cause"),
        "simulated_seconds": round(emulator.simulated_seconds(described["startDate"], end)),
        "state_transitions": sum(1 for e in events if e["type"].endswith("StateEntered")),
        "timeouts": sum(1 for e in events if e["type"] == "TaskTimedOut"),
        "history_events": len(events),
        "current_state": current_state(events),
        "execution_arn": execution_arn,
        "output": output,
        "cost": run_cost(emulator, machines.get(described["stateMachineArn"], ""), described,
                         events, output),
    }


def run_cost(emulator: Emulator, pipeline: str, described: dict[str, Any],
             events: list[dict[str, Any]], output: Any) -> dict[str, Any]:
    """The run's receipt as GET /runs/{name} gives it (each attempt's time from Batch's
    DescribeJobs), its history's times measured on the simulated clock (Step Functions stamps
    them in real time)."""
    plan = latest_state(events).get("plan") or {}
    batch = emulator.client("batch")
    return view.cost(pipeline, described, events, view.estimate(pipeline, output, plan),
                     emulator.simulated_seconds,
                     lambda ids: batch.describe_jobs(jobs=ids)["jobs"])


def _tags(fs: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in fs.get("Tags", [])}


class Executions:
    """Whether the execution a resource is tagged with still runs (it then owns the resource)."""

    def __init__(self, emulator: Emulator) -> None:
        self.sfn = emulator.client("stepfunctions")
        self.known: dict[str, str] = {}

    def status(self, tags: dict[str, str]) -> str | None:
        arn = tags.get("traingrid:execution")
        if not arn:
            return None
        if arn not in self.known:
            try:
                self.known[arn] = self.sfn.describe_execution(executionArn=arn)["status"]
            except self.sfn.exceptions.ExecutionDoesNotExist:
                self.known[arn] = "GONE"
        return self.known[arn]

    def running(self, tags: dict[str, str]) -> bool:
        return self.status(tags) == "RUNNING"


def file_systems(emulator: Emulator, executions: Executions | None = None
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(leaked, retained): a kept file system is accounted for while its expiry is ahead, one
    of a running execution is in use."""
    executions = executions or Executions(emulator)
    leaked: list[dict[str, Any]] = []
    retained: list[dict[str, Any]] = []
    now = emulator.now_iso()
    for fs in emulator.client("fsx").describe_file_systems()["FileSystems"]:
        tags = _tags(fs)
        if executions.running(tags):
            continue
        entry = {"type": "fsx:file-system", "id": fs["FileSystemId"],
                 "run": tags.get("traingrid:run"), "lifecycle": fs.get("Lifecycle"),
                 "expires_at": tags.get("traingrid:expires-at"),
                 "execution_status": executions.status(tags)}
        kept = "traingrid:retained" in tags and entry["expires_at"] and entry["expires_at"] > now
        (retained if kept else leaked).append(entry)
    return leaked, retained


def live_training_jobs(emulator: Emulator, regions: list[str],
                       executions: Executions | None = None) -> list[dict[str, Any]]:
    """SageMaker training jobs still running (or stopping) in any region, without a running
    execution."""
    executions = executions or Executions(emulator)
    found = []
    for region in regions:
        sagemaker = emulator.client("sagemaker", region)
        for status in LIVE_REGION_JOB_STATUSES:
            for job in sagemaker.list_training_jobs(StatusEquals=status)["TrainingJobSummaries"]:
                tags = _tags(sagemaker.list_tags(ResourceArn=job["TrainingJobArn"]))
                if not executions.running(tags):
                    found.append({"type": "sagemaker:training-job", "id": job["TrainingJobName"],
                                  "region": region, "status": status,
                                  "run": tags.get("traingrid:run"),
                                  "execution_status": executions.status(tags)})
    return found


def live_jobs(emulator: Emulator, executions: Executions | None = None) -> list[dict[str, Any]]:
    """Batch jobs still queued or running, without a running execution."""
    executions = executions or Executions(emulator)
    batch = emulator.client("batch")
    found = []
    for queue in batch.describe_job_queues()["jobQueues"]:
        for status in LIVE_JOB_STATUSES:
            for job in batch.list_jobs(jobQueue=queue["jobQueueArn"], jobStatus=status)[
                "jobSummaryList"
            ]:
                (described,) = batch.describe_jobs(jobs=[job["jobId"]])["jobs"]
                tags = described.get("tags") or {}
                if not executions.running(tags):
                    found.append({"type": "batch:job", "id": job["jobId"],
                                  "name": job["jobName"], "status": job["status"],
                                  "execution_status": executions.status(tags)})
    return found


def function_log_lines(emulator: Emulator, stack: Stack, logical_id: str
                       ) -> list[dict[str, Any]]:
    """A function's structured (JSON) log lines from its CloudWatch Logs group, oldest first."""
    logs = emulator.client("logs")
    group, stream = lambda_inprocess.log_location_of(ACCOUNT_ID, emulator.region,
                                                     stack.resources[logical_id])
    try:
        # The group is shared by the stack's functions: read every page of it.
        pages = logs.get_paginator("filter_log_events").paginate(logGroupName=group)
        events = [event for page in pages for event in page["events"]]
    except logs.exceptions.ResourceNotFoundException:
        return []
    lines = []
    for event in events:
        if f"/{stream}" not in event["logStreamName"]:  # another function's, in a shared group
            continue
        try:
            lines.append(json.loads(event["message"]))
        except ValueError:
            continue
    return lines


def janitor_actions(emulator: Emulator, stack: Stack) -> list[dict[str, Any]]:
    """What the janitor released, from its CloudWatch Logs (every pass: on schedule and when
    a run ended)."""
    actions = []
    for line in function_log_lines(emulator, stack, "JanitorFunction"):
        if str(line.get("message", "")).startswith("janitor: ") and "action" in line:
            actions.append({k: line.get(k) for k in (
                "action", "type", "id", "region", "run", "execution_status", "reason",
                "export_task_id", "archive", "expires_at") if line.get(k) is not None})
    return actions


def unlisted_outputs(emulator: Emulator, bucket: str, runs: list[str],
                     listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Outputs of runs that reached S3 without a manifest: exported before the run was
    stopped, or by the janitor after it."""
    have_manifest = {a["run"] for a in listed}
    s3 = emulator.client("s3")
    found = []
    for run in (r for r in runs if r not in have_manifest):
        prefix = f"runs/{run}/"
        for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
            found.append({"run": run, "uri": f"s3://{bucket}/{item['Key']}",
                          "size": item["Size"], "etag": item["ETag"].strip('"'),
                          "manifest": False})
    return found


def janitor_summary(passes: list[dict[str, Any]], actions: list[dict[str, Any]],
                    leaked: list[dict[str, Any]]) -> str:
    done = ", ".join(f"{a['action']} {a['type']} {a['id']}" for a in actions) or "nothing"
    left = (f"{len(leaked)} resource(s) leaked" if leaked
            else "nothing leaked: no file system, Batch job or SageMaker job is left without "
                 "a running execution")
    return f"after {len(passes)} scheduled janitor pass(es) the janitor had done {done}; {left}"


def artifacts(emulator: Emulator, bucket: str) -> list[dict[str, Any]]:
    s3 = emulator.client("s3")
    found = []
    listing = s3.list_objects_v2(Bucket=bucket, Prefix="runs/").get("Contents", [])
    for item in listing:
        # runs/<run>/manifest.json: a run's archive manifest (not a file its job exported)
        if item["Key"].endswith("/manifest.json") and item["Key"].count("/") == 2:
            manifest = json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
            found += [{"run": manifest["run"], "uri": f"s3://{bucket}/{o['key']}",
                       "size": o["size"], "etag": o["etag"]} for o in manifest["objects"]]
    return found


def trigger_outcomes(emulator: Emulator, stack: Stack) -> list[dict[str, Any]]:
    """What the upload trigger decided for each manifest (from its CloudWatch Logs)."""
    outcomes = []
    for line in function_log_lines(emulator, stack, "StartRunFunction"):
        if line.get("message") == "manifest rejected; nothing started":
            outcomes.append({"status": "rejected", "key": line.get("key"),
                             "problems": line.get("problems")})
    return outcomes


def planned_inputs(events: list[dict[str, Any]]) -> dict[str, str]:
    """Why each data region's job reads its data as it does, from the fan-out's plan."""
    plan = _task_output(events, "PlanFanout") or {}
    return {job["requested_region"]: job.get("input_reason") for job in plan.get("jobs", [])}


def training_job(emulator: Emulator, job: dict[str, Any]) -> dict[str, Any]:
    """What a region's SageMaker job ran: its image, entry point and hyperparameters (those
    SageMaker's toolkit passes as flags; its own ``sagemaker_*`` ones left out), and how it
    read its data (input mode, volume) as SageMaker received them."""
    unknown = {"image": None, "entry_point": None, "hyperparameters": None,
               "input_mode": None, "volume_size_gb": None}
    if not job.get("job_name"):
        return unknown
    try:
        described = emulator.client("sagemaker", job["region"]).describe_training_job(
            TrainingJobName=job["job_name"])
    except ClientError:  # its CreateTrainingJob was refused
        return unknown
    hyperparameters = described.get("HyperParameters") or {}
    return {
        "image": described["AlgorithmSpecification"]["TrainingImage"],
        "entry_point": hyperparameters.get("sagemaker_program"),
        "hyperparameters": {k: v for k, v in hyperparameters.items()
                            if not k.startswith("sagemaker_")},
        "input_mode": described["AlgorithmSpecification"].get("TrainingInputMode"),
        "volume_size_gb": described["ResourceConfig"].get("VolumeSizeInGB"),
    }


def fanout_cost(emulator: Emulator, database_url: str, execution_arn: str,
                jobs: list[dict[str, Any]],
                events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A fan-out's receipt with each region's SageMaker job (DescribeTrainingJob's
    BillableTimeInSeconds × InstanceCount at the region's on-demand price) and its staging at
    the data region's transfer price, both from the campaign database."""
    described = emulator.client("stepfunctions").describe_execution(executionArn=execution_arn)
    events = history(emulator, execution_arn) if events is None else events
    output = json.loads(described["output"]) if described.get("output") else None
    usage = receipt.fanout_usage(events, output, described["status"] == "RUNNING")
    described = region_usage.describe_jobs(jobs)  # as the deployed run's record does
    with transaction(database_url) as session:
        usage = usage.with_regions(region_usage.region_usage(session, jobs, described))
    plan = _task_output(events, "PlanFanout") or {}
    return receipt.receipt(usage, view.estimate(view.CAMPAIGN_FANOUT, output, plan))


def training_record(database_url: str, execution_arn: str) -> dict[str, Any] | None:
    """A TrainingRun's outcome as the campaign database holds it (None: not recorded)."""
    with transaction(database_url) as session:
        row = TrainingRunRepository(session).get(execution_arn)
        return None if row is None else {
            "status": row.status, "recorded_by": row.recorded_by, "error": row.error,
            "artifacts": row.artifacts, "manifest": row.manifest,
            "training_s": row.training_s, "ended_at": row.ended_at.isoformat(),
            "cost_usd": None if row.cost_usd is None else float(row.cost_usd)}


def build(emulator: Emulator, deployment: Deployment, execution_arns: list[str],
          janitor_passes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    stack = deployment.stack
    histories = {arn: history(emulator, arn) for arn in execution_arns}  # each read once
    executions = [execution_entry(emulator, stack, arn, histories[arn]) for arn in execution_arns]
    found = artifacts(emulator, stack.outputs["DataBucketName"])
    for entry in executions:
        events = histories[entry["execution_arn"]]
        if entry["state_machine"] == "TrainingRun":
            entry["cleanup"] = cleanup(emulator, events)
            entry.update(training_attempts(events))
            entry["record"] = training_record(deployment.database_url, entry["execution_arn"])
            # The receipt the run recorded, beside the API's (``cost.actual.total``): the same.
            entry["cost"]["recorded_total"] = (entry["record"] or {}).get("cost_usd")
        if entry["state_machine"] == "CampaignFanout":
            reasons = planned_inputs(events)
            entry["jobs"] = [
                job | training_job(emulator, job)
                | {"input_reason": reasons.get(job["requested_region"])}
                for job in sample_campaign.region_jobs(deployment.database_url,
                                                     entry["execution_arn"])]
            entry["cost"] = fanout_cost(emulator, deployment.database_url,
                                        entry["execution_arn"], entry["jobs"], events)
            found += [{"run": entry["name"], "uri": job["artifacts"], "region": job["region"]}
                      for job in entry["jobs"] if job["artifacts"]]
    owners = Executions(emulator)
    leaked_fs, retained = file_systems(emulator, owners)
    leaked = leaked_fs + live_jobs(emulator, owners) + live_training_jobs(
        emulator, sorted(deployment.regional), owners)
    passes = janitor_passes or []
    actions = janitor_actions(emulator, stack)
    found += unlisted_outputs(
        emulator, stack.outputs["DataBucketName"],
        [e["name"] for e in executions if e["state_machine"] == "TrainingRun"], found)
    return {
        "executions": executions,
        "leaked_resources": leaked,
        "janitor": {"scheduled_passes": len(passes), "actions": actions,
                    "errors": [e for p in passes for e in p["errors"]],
                    "summary": janitor_summary(passes, actions, leaked)},
        "retained_resources": retained,
        "artifacts": found,
        "rejected_manifests": trigger_outcomes(emulator, stack),
        "run_status_events": run_events.summary(run_events.published(emulator,
                                                                   execution_arns)),
    }
