"""What happened in the emulated account: executions, artifacts, and any resource left behind."""

from __future__ import annotations

import json
from typing import Any

from traingrid_local import campaign_demo
from traingrid_local.emulator.deploy import Stack
from traingrid_local.emulator.session import Emulator
from traingrid_local.environment import Deployment

LIVE_JOB_STATUSES = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING")


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


def _task_output(events: list[dict[str, Any]], state: str) -> dict[str, Any] | None:
    """The output of the first successful task of ``state``."""
    scheduled = {e["id"] for e in events if e["type"] == "TaskStateEntered"
                 and e["stateEnteredEventDetails"]["name"] == state}
    inside = False
    for event in events:
        if event["id"] in scheduled:
            inside = True
        elif inside and event["type"] == "TaskSucceeded":
            return json.loads(event["taskSucceededEventDetails"]["output"])
    return None


def cleanup(emulator: Emulator, events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How long a TrainingRun's file system sat idle after its training job ended: until the
    archive started, plus from the archive's end until the file system's deletion (the export
    itself is work, not idleness). None if the job never ran to an end."""
    submitted = _task_output(events, "SubmitTrainingJob")
    deleted_at = _entered(emulator, events, "DeleteFileSystem")
    if submitted is None or deleted_at is None:
        return None
    job = emulator.client("batch").describe_jobs(jobs=[submitted["JobId"]])["jobs"][0]
    if "stoppedAt" not in job:
        return None
    ended_at = job["stoppedAt"] / 1000
    export = _task_output(events, "StartExport")
    if export is None:
        idle = round(deleted_at - ended_at, 1)
        return {"idle_s": idle, "noticed_s": idle, "export_s": 0.0}
    task = emulator.client("fsx").describe_data_repository_tasks(
        TaskIds=[export["DataRepositoryTask"]["TaskId"]])["DataRepositoryTasks"][0]
    export_started = _entered(emulator, events, "StartExport") or ended_at
    export_ended = task["EndTime"].timestamp() if "EndTime" in task else deleted_at
    return {
        "idle_s": round(export_started - ended_at + max(0.0, deleted_at - export_ended), 1),
        "noticed_s": round(export_started - ended_at, 1),  # the job's end, until acted on
        "export_s": round(export_ended - export_started, 1),
    }


def execution_entry(emulator: Emulator, stack: Stack, execution_arn: str) -> dict[str, Any]:
    sfn = emulator.client("stepfunctions")
    described = sfn.describe_execution(executionArn=execution_arn)
    events = history(emulator, execution_arn)
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
    }


def _tags(fs: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in fs.get("Tags", [])}


def file_systems(emulator: Emulator) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(leaked, retained): a kept file system is accounted for while its expiry is ahead."""
    leaked, retained = [], []
    now = emulator.now_iso()
    for fs in emulator.client("fsx").describe_file_systems()["FileSystems"]:
        tags = _tags(fs)
        entry = {"type": "fsx:file-system", "id": fs["FileSystemId"],
                 "run": tags.get("traingrid:run"), "lifecycle": fs.get("Lifecycle"),
                 "expires_at": tags.get("traingrid:expires-at")}
        kept = "traingrid:retained" in tags and entry["expires_at"] and entry["expires_at"] > now
        (retained if kept else leaked).append(entry)
    return leaked, retained


def live_training_jobs(emulator: Emulator, regions: list[str]) -> list[dict[str, Any]]:
    """SageMaker training jobs still running (or stopping) in any region."""
    found = []
    for region in regions:
        sagemaker = emulator.client("sagemaker", region)
        for status in ("InProgress", "Stopping"):
            for job in sagemaker.list_training_jobs(StatusEquals=status)["TrainingJobSummaries"]:
                found.append({"type": "sagemaker:training-job", "id": job["TrainingJobName"],
                              "region": region, "status": status})
    return found


def live_jobs(emulator: Emulator) -> list[dict[str, Any]]:
    batch = emulator.client("batch")
    found = []
    for queue in batch.describe_job_queues()["jobQueues"]:
        for status in LIVE_JOB_STATUSES:
            for job in batch.list_jobs(jobQueue=queue["jobQueueArn"], jobStatus=status)[
                "jobSummaryList"
            ]:
                found.append({"type": "batch:job", "id": job["jobId"], "name": job["jobName"],
                              "status": job["status"]})
    return found


def artifacts(emulator: Emulator, bucket: str) -> list[dict[str, Any]]:
    s3 = emulator.client("s3")
    found = []
    listing = s3.list_objects_v2(Bucket=bucket, Prefix="runs/").get("Contents", [])
    for item in listing:
        if item["Key"].endswith("/manifest.json"):
            manifest = json.loads(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read())
            found += [{"run": manifest["run"], "uri": f"s3://{bucket}/{o['key']}",
                       "size": o["size"], "etag": o["etag"]} for o in manifest["objects"]]
    return found


def trigger_outcomes(emulator: Emulator, stack: Stack) -> list[dict[str, Any]]:
    """What the upload trigger decided for each manifest (from its CloudWatch Logs)."""
    logs = emulator.client("logs")
    group = f"/aws/lambda/{stack.resources['StartRunFunction']}"
    try:
        events = logs.filter_log_events(logGroupName=group)["events"]
    except logs.exceptions.ResourceNotFoundException:
        return []
    outcomes = []
    for event in events:
        try:
            line = json.loads(event["message"])
        except ValueError:
            continue
        if line.get("message") == "manifest rejected; nothing started":
            outcomes.append({"status": "rejected", "key": line.get("key"),
                             "problems": line.get("problems")})
    return outcomes


def build(emulator: Emulator, deployment: Deployment,
          execution_arns: list[str]) -> dict[str, Any]:
    stack = deployment.stack
    executions = [execution_entry(emulator, stack, arn) for arn in execution_arns]
    found = artifacts(emulator, stack.outputs["DataBucketName"])
    for entry in executions:
        if entry["state_machine"] == "TrainingRun":
            entry["cleanup"] = cleanup(emulator, history(emulator, entry["execution_arn"]))
        if entry["state_machine"] == "CampaignFanout":
            entry["jobs"] = campaign_demo.region_jobs(deployment.database_url,
                                                       entry["execution_arn"])
            found += [{"run": entry["name"], "uri": job["artifacts"], "region": job["region"]}
                      for job in entry["jobs"] if job["artifacts"]]
    leaked_fs, retained = file_systems(emulator)
    return {
        "executions": executions,
        "leaked_resources": leaked_fs + live_jobs(emulator)
        + live_training_jobs(emulator, sorted(deployment.regional)),
        "retained_resources": retained,
        "artifacts": found,
        "rejected_manifests": trigger_outcomes(emulator, stack),
    }
