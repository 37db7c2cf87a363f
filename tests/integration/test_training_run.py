"""TrainingRun end to end on the emulator: every scenario, through the deployed stack and a
real S3 upload."""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.iam import missing_permissions
from traingrid.training.plan import DEFAULT_TRAIN_COMMAND
from traingrid_local.stack import report
from traingrid_local.stack.environment import DEMO_BUCKET

pytestmark = pytest.mark.e2e


def artifact_names(outcome) -> set[str]:
    """The archived outputs' paths in the job's outputs folder (s3://b/runs/<run>/outputs/…)."""
    return {a["uri"].split("/", 6)[-1] for a in outcome.report["artifacts"]}


def no_file_systems(outcome) -> bool:
    return outcome.emulator.client("fsx").describe_file_systems()["FileSystems"] == []


def test_happy_path_trains_archives_and_releases(run_scenario):
    outcome = run_scenario("happy")
    execution = outcome.execution
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    assert execution["state_machine"] == "TrainingRun"
    assert execution["name"].startswith("imagenet2012-resized-")
    assert execution["simulated_seconds"] >= 3600
    assert {"model/final.pt", "metrics.json", "logs/main-node.log"} <= artifact_names(outcome)
    manifest_uri = execution["output"]["manifest"]
    bucket, key = manifest_uri.removeprefix("s3://").split("/", 1)
    manifest = json.loads(outcome.emulator.client("s3").get_object(Bucket=bucket, Key=key)[
        "Body"].read())
    assert manifest["object_count"] == len(outcome.report["artifacts"]) == len(manifest["objects"])
    assert all({"key", "size", "etag"} <= set(o) for o in manifest["objects"])
    # The job exported its outputs before it ended; no export task was needed.
    assert manifest["archived_by"] == "training job" and manifest["export_task_id"] is None
    assert "outputs.json" in artifact_names(outcome)
    assert outcome.report["leaked_resources"] == [] and outcome.report["retained_resources"] == []
    assert no_file_systems(outcome)
    # Record: the outcome, what the run used and where its artifacts are, in the database.
    record = outcome.record
    assert (record["status"], record["recorded_by"], record["name"]) == (
        "SUCCEEDED", "run", execution["name"])
    assert (record["manifest"], record["artifacts"]) == (
        manifest_uri, manifest_uri.removesuffix("manifest.json"))
    assert record["archived_objects"] == manifest["object_count"]
    assert (record["nodes"], record["mpi_gpus"], record["training_s"]) == (20, 160, 3600)
    assert record["job_id"] == execution["output"]["job_id"] and record["error"] is None
    assert record["ended_at"] > record["started_at"]
    # Every function logs to the stack's function log group, in streams named after it.
    streams = outcome.emulator.client("logs").describe_log_streams(
        logGroupName="/traingrid/traingrid/functions")["logStreams"]
    assert any(f"/{outcome.stack.resources['RecordRunFunction']}[$LATEST]" in s["logStreamName"]
               for s in streams)


def test_training_job_gets_the_planned_nodes_and_environment(run_scenario):
    outcome = run_scenario("happy", manifest={"nodes": 4, "instance_type": "p4d.24xlarge",
                                              "batch_size": 128})
    job_id = outcome.execution["output"]["job_id"]
    job = outcome.emulator.client("batch").describe_jobs(jobs=[job_id])["jobs"][0]
    assert job["jobName"] == outcome.execution["name"]
    assert job["nodeProperties"]["numNodes"] == 4
    from moto.batch.models import batch_backends

    simulated = batch_backends["123456789012"]["us-east-1"].get_job_by_id(job_id).simulated
    assert simulated.instance_type == "p4d.24xlarge"
    env = simulated.environment
    assert (env["MPI_GPUS"], env["BATCH_SIZE"]) == ("32", "128")
    assert env["FSX_DNS_NAME"].endswith(".fsx.us-east-1.amazonaws.com")
    assert env["FSX_MOUNT_NAME"] and env["OUTPUT_DIR"] == "/fsx/outputs"
    # By default every node runs the image's trainer.
    assert simulated.command == list(DEFAULT_TRAIN_COMMAND)




def test_file_system_failure_ends_the_run_and_deletes_it(run_scenario):
    outcome = run_scenario("fsx-create-failed")
    execution = outcome.execution
    assert (execution["status"], execution["error"]) == ("FAILED", "FileSystemFailed")
    assert "FAILED while hydrating" in execution["cause"]
    assert "was deleted" in execution["cause"]
    assert outcome.report["leaked_resources"] == [] and no_file_systems(outcome)
    assert outcome.report["artifacts"] == []


def test_training_failure_is_explained_archived_and_released(run_scenario):
    outcome = run_scenario("batch-job-failed")
    execution = outcome.execution
    assert (execution["status"], execution["error"]) == ("FAILED", "TrainingJobFailed")
    assert "main node 0 exited with code 1" in execution["cause"]
    assert "Check the training logs" in execution["cause"]
    names = artifact_names(outcome)
    assert "logs/main-node.log" in names and "model/final.pt" not in names
    assert outcome.report["leaked_resources"] == [] and no_file_systems(outcome)
    record = outcome.record
    assert (record["status"], record["error"]) == ("FAILED", "TrainingJobFailed")
    assert record["failure_cause"] == execution["cause"]
    assert record["job_status"] == "FAILED" and record["manifest"] is not None


def test_a_lost_node_resumes_from_its_checkpoint_and_the_run_succeeds(run_scenario):
    outcome = run_scenario("node-lost")
    execution = outcome.execution
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    name = execution["name"]
    checkpoint = "/fsx/outputs/checkpoints/epoch-0001.pt"
    first, second = execution["attempts"]
    assert (first["nodes"], first["reason"], first["resumed_from"]) == (20, "first attempt", None)
    assert first["outcome"].startswith("node lost: Host EC2 (instance")
    assert first["ran_s"] == 20 * 60
    assert (second["nodes"], second["resumed_from"]) == (20, checkpoint)
    assert second["reason"] == first["outcome"]
    assert (execution["nodes_requested"], execution["nodes_used"]) == (20, 20)
    # The second job went on from the first one's checkpoint, and said so.
    log = outcome.emulator.client("s3").get_object(
        Bucket=DEMO_BUCKET, Key=f"runs/{name}/outputs/logs/main-node.log")["Body"].read().decode()
    assert f"attempt 2: resumed from {checkpoint} (epoch 1)" in log
    assert {"model/final.pt", "metrics.json"} <= artifact_names(outcome)
    jobs = outcome.emulator.client("batch").list_jobs(
        jobQueue=outcome.stack.outputs["TrainingJobQueueArn"], jobStatus="FAILED")
    assert [j["jobId"] for j in jobs["jobSummaryList"]] == [first["job_id"]]
    record = outcome.record
    assert (record["status"], record["nodes"], record["nodes_used"]) == ("SUCCEEDED", 20, 20)
    assert [a["resumed_from"] for a in record["attempts"]] == [None, checkpoint]
    assert outcome.report["leaked_resources"] == [] and no_file_systems(outcome)


def test_a_node_lost_on_every_attempt_fails_the_run_after_max_attempts(run_scenario):
    outcome = run_scenario("node-lost-every-attempt")
    execution = outcome.execution
    assert (execution["status"], execution["error"]) == ("FAILED", "TrainingJobFailed")
    assert [a["nodes"] for a in execution["attempts"]] == [20, 20, 20]
    assert [a["resumed_from"] is None for a in execution["attempts"]] == [True, False, False]
    cause = execution["cause"]
    assert "The run made 3 attempts: 1: 20 nodes (first attempt) → node lost" in cause
    assert "all 3 attempts used" in cause
    # The hosts went away before the jobs could export: the export task archived the rest.
    assert execution["cleanup"]["export_s"] > 0
    names = artifact_names(outcome)
    assert "checkpoints/epoch-0003.pt" in names and "outputs.json" not in names
    assert "Artifacts archived:" in cause
    record = outcome.record
    assert (record["nodes"], record["nodes_used"], len(record["attempts"])) == (20, 20, 3)
    assert outcome.report["leaked_resources"] == [] and no_file_systems(outcome)


def decided_within_minutes(batch, summary: dict) -> float:
    """Simulated minutes from a terminated job's submission to its end (Batch's stamps)."""
    (job,) = batch.describe_jobs(jobs=[summary["jobId"]])["jobs"]
    return (job["stoppedAt"] - job["createdAt"]) / 60_000


def test_a_run_without_capacity_for_its_nodes_shrinks_and_trains_on_what_it_gets(run_scenario):
    outcome = run_scenario("capacity-shrink")
    execution = outcome.execution
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    assert [a["nodes"] for a in execution["attempts"]] == [20, 10, 5]
    # EC2's InsufficientInstanceCapacity, in the compute environment's scaling activities,
    # ended each wait within minutes, not at the 30-minute runnable limit.
    assert re.fullmatch(r"no capacity \(InsufficientInstanceCapacity\): waited [1-5] min in "
                        r"the queue on 20 nodes; shrunk to 10", execution["attempts"][1]["reason"])
    assert (execution["nodes_requested"], execution["nodes_used"]) == (20, 5)
    assert (execution["output"]["nodes"], execution["output"]["mpi_gpus"]) == (5, 40)
    batch = outcome.emulator.client("batch")
    queue = outcome.stack.outputs["TrainingJobQueueArn"]
    stopped = batch.list_jobs(jobQueue=queue, jobStatus="FAILED")["jobSummaryList"]
    assert len(stopped) == 2  # the two jobs that never got capacity, terminated
    assert all(decided_within_minutes(batch, job) <= 5 for job in stopped)
    (trained,) = batch.list_jobs(jobQueue=queue, jobStatus="SUCCEEDED")["jobSummaryList"]
    (described,) = batch.describe_jobs(jobs=[trained["jobId"]])["jobs"]
    assert described["nodeProperties"]["numNodes"] == 5
    metrics = json.loads(outcome.emulator.client("s3").get_object(
        Bucket=DEMO_BUCKET, Key=f"runs/{execution['name']}/outputs/metrics.json")["Body"].read())
    assert metrics["world_size"] == 40
    assert outcome.record["nodes_used"] == 5
    assert outcome.report["leaked_resources"] == [] and no_file_systems(outcome)


def test_a_run_over_the_accounts_vcpu_limit_is_told_so_and_shrinks_within_minutes(run_scenario):
    outcome = run_scenario("vcpu-quota")
    execution = outcome.execution
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    assert [a["nodes"] for a in execution["attempts"]] == [20, 10, 5]
    assert re.fullmatch(r"no capacity \(VcpuLimitExceeded\): waited [1-5] min in the queue on 10 "
                        r"nodes; shrunk to 5", execution["attempts"][2]["reason"])
    batch = outcome.emulator.client("batch")
    queue = outcome.stack.outputs["TrainingJobQueueArn"]
    stopped = batch.list_jobs(jobQueue=queue, jobStatus="FAILED")["jobSummaryList"]
    assert len(stopped) == 2 and all(decided_within_minutes(batch, j) <= 5 for j in stopped)
    assert outcome.record["nodes_used"] == 5
    assert outcome.report["leaked_resources"] == [] and no_file_systems(outcome)


def test_a_manifest_overrides_the_scenarios_request(run_scenario):
    outcome = run_scenario("capacity-shrink", manifest={"min_nodes": 12})
    execution = outcome.execution
    assert (execution["status"], execution["error"]) == ("FAILED", "TrainingJobStuck")
    assert [a["nodes"] for a in execution["attempts"]] == [20, 12]
    assert "not retried: no capacity for 12 nodes and min_nodes is 12" in execution["cause"]
    assert execution["nodes_used"] is None
    assert outcome.report["leaked_resources"] == [] and no_file_systems(outcome)


def test_job_stuck_in_runnable_is_terminated_with_a_diagnosis(run_scenario):
    outcome = run_scenario("stuck-runnable")
    execution = outcome.execution
    assert (execution["status"], execution["error"]) == ("FAILED", "TrainingJobStuck")
    queue = outcome.stack.outputs["TrainingJobQueueArn"]
    # The queue's own name (CloudFormation's `TrainingJobQueue-<random>`), as Batch says it.
    assert f"No capacity for 20 × p4d.24xlarge in job queue {queue.rsplit('/', 1)[1]}:" in (
        execution["cause"])
    batch = outcome.emulator.client("batch")
    (job,) = batch.list_jobs(jobQueue=queue, jobStatus="FAILED")["jobSummaryList"]
    assert job["jobName"] == execution["name"]
    # AWS's own message names the type; the run decided in minutes, not at the 30-min limit.
    assert "AWS reports InsufficientInstanceCapacity (scaling activity of Auto Scaling group " \
           "TrainingComputeEnvironment" in execution["cause"]
    assert "We currently do not have sufficient p4d.24xlarge capacity" in execution["cause"]
    assert decided_within_minutes(batch, job) <= 5
    assert outcome.report["leaked_resources"] == [] and no_file_systems(outcome)


def test_failed_archive_keeps_the_file_system_and_says_where(run_scenario):
    outcome = run_scenario("export-failed")
    execution = outcome.execution
    assert (execution["status"], execution["error"]) == ("FAILED", "ExportFailed")
    (kept,) = outcome.report["retained_resources"]
    assert kept["run"] == execution["name"]
    assert f"{kept['id']} is kept until {kept['expires_at']}" in execution["cause"]
    assert f"/runs/{execution['name']}" in execution["cause"]
    assert outcome.report["leaked_resources"] == []
    fs = outcome.emulator.client("fsx").describe_file_systems()["FileSystems"][0]
    assert fs["Lifecycle"] == "AVAILABLE"
    record = outcome.record
    assert (record["status"], record["retained_file_system"]) == ("FAILED", kept["id"])
    assert record["artifacts"] and record["manifest"] is None


def test_throttling_is_absorbed_by_retries(run_scenario):
    outcome = run_scenario("throttling")
    execution = outcome.execution
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    events = report.history(outcome.emulator, execution["execution_arn"])
    throttled = [e for e in events if e["type"] == "TaskFailed"
                 and "Rate exceeded" in e["taskFailedEventDetails"].get("cause", "")]
    assert throttled, "the state machine should have retried throttled calls"
    assert outcome.report["leaked_resources"] == []


def test_duplicate_uploads_start_one_run(run_scenario):
    outcome = run_scenario("happy", uploads=3)
    assert len(outcome.report["executions"]) == 1
    assert outcome.execution["status"] == "SUCCEEDED"


def test_invalid_manifest_is_rejected_and_nothing_starts(run_scenario, load_event):
    outcome = run_scenario("happy", manifest=load_event("manifest-invalid.json"))
    assert outcome.report["executions"] == []
    (rejected,) = outcome.report["rejected_manifests"]
    pointers = {p["pointer"] for p in rejected["problems"]}
    assert {"/nodes", "/instance_type", "/colour", "/extra_mpi_params"} <= pointers
    assert no_file_systems(outcome)


def test_what_the_stack_cannot_run_is_rejected_with_every_reason(run_scenario):
    """A dataset outside the data bucket, and an instance type the compute environment does
    not launch (it would wait in RUNNABLE until the watchdog): nothing starts."""
    outcome = run_scenario("happy", manifest={"dataset": "s3://someone-elses-bucket/data/",
                                              "instance_type": "g5.48xlarge"})
    assert outcome.report["executions"] == []
    (rejected,) = outcome.report["rejected_manifests"]
    problems = {p["pointer"]: p["message"] for p in rejected["problems"]}
    assert f"s3://{DEMO_BUCKET}/ only" in problems["/dataset"]
    assert problems["/instance_type"].startswith(
        "this stack's compute environment launches only p4d.24xlarge, p5.48xlarge; "
        "g5.48xlarge")
    assert no_file_systems(outcome)


@pytest.mark.parametrize("scenario", ["happy", "export-failed", "stuck-runnable"])
def test_each_function_calls_only_what_its_role_allows(run_scenario, scenario):
    outcome = run_scenario(scenario)
    assert outcome.calls, "no function called AWS"
    assert missing_permissions(outcome.stack, outcome.calls) == []
