"""The janitor on the emulator: a run stopped while hydrating, training or archiving leaves
nothing behind once the janitor has run, and nothing that was not archived is deleted."""

from __future__ import annotations

import json

import pytest
from moto.fsx.models import fsx_backends

from tests.emulator.helpers import wait_until
from tests.integration.conftest import SPEED
from tests.integration.iam import missing_permissions
from traingrid.training.plan import OUTPUTS_DIR, archive_prefix
from traingrid_local.demo.runner import DEFAULT_KEY, settle, upload_sample_dataset, wait_for_runs
from traingrid_local.emulator import batch, fsx, lambda_inprocess
from traingrid_local.emulator.fault_injection import StateFault
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator
from traingrid_local.stack import report, schedules
from traingrid_local.stack.environment import DEMO_BUCKET, deploy_traingrid

pytestmark = pytest.mark.e2e


def s3_objects(emulator, bucket: str = DEMO_BUCKET) -> dict[str, bytes]:
    s3 = emulator.client("s3")
    listing = s3.list_objects_v2(Bucket=bucket, Prefix="runs/").get("Contents", [])
    return {o["Key"]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            for o in listing}


def unsafe_deletions(emulator) -> list[str]:
    """Files of a deleted file system's run outputs that are not in S3 with the same bytes
    (below the run's prefix, the file system's export root)."""
    archived = s3_objects(emulator)
    return [f"{fs_id}:{path}"
            for fs_id, record in fsx.deleted(fsx_backends[ACCOUNT_ID][emulator.region]).items()
            for path, data in record["files"].items()
            if path.startswith(f"{OUTPUTS_DIR}/")
            and archived.get(archive_prefix(record["tags"]["traingrid:run"]) + path) != data]


@pytest.mark.parametrize(("scenario", "stopped_in", "released"), [
    ("abort-during-hydrate", "CheckFileSystem", {("delete", "fsx:file-system")}),
    # The job exports its outputs as it stops: then its file system can go.
    ("abort-during-training", "AwaitTrainingJob", {("terminate", "batch:job"),
                                                   ("delete", "fsx:file-system")}),
    ("abort-during-archive", "CheckArchive", {("delete", "fsx:file-system")}),
])
def test_a_stopped_run_leaves_nothing_once_the_janitor_ran(run_scenario, scenario, stopped_in,
                                                           released):
    outcome = run_scenario(scenario)
    execution = outcome.execution
    assert (execution["status"], execution["current_state"]) == ("ABORTED", stopped_in)
    entered = {e["stateEnteredEventDetails"]["name"]
               for e in report.history(outcome.emulator, execution["execution_arn"])
               if e["type"].endswith("StateEntered")}
    assert "DeleteFileSystem" not in entered  # the run itself released nothing

    passes = settle(outcome.emulator, outcome.deployment)
    after = report.build(outcome.emulator, outcome.deployment, [execution["execution_arn"]],
                         passes)

    assert after["leaked_resources"] == [] and after["retained_resources"] == []
    assert "nothing leaked" in after["janitor"]["summary"]
    assert {(a["action"], a["type"]) for a in after["janitor"]["actions"]} == released
    assert unsafe_deletions(outcome.emulator) == []
    assert outcome.emulator.client("fsx").describe_file_systems()["FileSystems"] == []
    assert missing_permissions(outcome.stack, dict(lambda_inprocess.CALLS)) == []
    # The run could not record its outcome: the janitor did, saying what it released.
    record = outcome.record
    assert (record["status"], record["error"], record["recorded_by"]) == (
        "ABORTED", "ABORTED", "janitor")
    assert "The execution ended ABORTED before recording its outcome" in record[
        "failure_cause"]
    assert "Start the run again" in record["failure_cause"]
    assert record["dataset"] == f"s3://{DEMO_BUCKET}/imagenet2012/resized/"


def test_the_janitor_leaves_a_running_run_alone_and_refuses_other_events(emulated):
    emulator, deployment = emulated("happy")
    upload_sample_dataset(emulator)
    emulator.client("s3").put_object(Bucket=DEMO_BUCKET, Key=DEFAULT_KEY, Body=b"{}")
    sfn = emulator.client("stepfunctions")
    machine = deployment.stack.outputs["TrainingRunStateMachineArn"]
    wait_until(lambda: emulator.client("fsx").describe_file_systems()["FileSystems"],
               timeout=60, what="the run's file system")

    result = schedules.fire(emulator, deployment.stack, "janitor")

    assert result["released"] == [] and result["errors"] == []
    assert result["kept"] >= 1
    assert [e["status"] for e in sfn.list_executions(stateMachineArn=machine)["executions"]] \
        == ["RUNNING"]
    response = emulator.client("lambda").invoke(
        FunctionName=deployment.stack.resources["JanitorFunction"],
        Payload=json.dumps({"detail-type": "Object Created", "detail": {}}).encode())
    payload = json.loads(response["Payload"].read())
    assert response["FunctionError"] == "Unhandled"
    assert payload["errorType"] == "RequestInvalid"
    assert "Scheduled Event" in payload["errorMessage"]


def test_a_failed_archive_keeps_the_file_system_past_the_janitor(run_scenario):
    outcome = run_scenario("export-failed")
    result = schedules.fire(outcome.emulator, outcome.stack, "janitor")

    (kept,) = outcome.report["retained_resources"]
    assert outcome.emulator.client("fsx").describe_file_systems()["FileSystems"][0][
        "FileSystemId"] == kept["id"]
    assert result["released"] == []


@pytest.fixture
def export_refused(tmp_path, monkeypatch):
    """A run stopped 30 minutes into training while S3 refuses the file system's exports."""
    monkeypatch.setattr(batch, "TRAINING_SECONDS", 3600)
    emulator = Emulator(speed=SPEED, fault_names={"export-failed"}, state_faults={
        "AwaitTrainingJob": StateFault("abort", after_s=1800)}).__enter__()
    deployment = deploy_traingrid(emulator, database_url=f"sqlite:///{tmp_path / 'db.sqlite'}")
    yield emulator, deployment
    emulator.__exit__(None, None, None)
    deployment.close()


def test_outputs_the_janitor_cannot_export_keep_their_file_system(export_refused):
    emulator, deployment = export_refused
    upload_sample_dataset(emulator)
    emulator.client("s3").put_object(Bucket=DEMO_BUCKET, Key=DEFAULT_KEY, Body=b"{}")
    (arn,) = wait_for_runs(emulator, [deployment.stack.outputs["TrainingRunStateMachineArn"]],
                           120, None)

    passes = settle(emulator, deployment)
    after = report.build(emulator, deployment, [arn], passes)

    assert after["executions"][0]["status"] == "ABORTED"
    actions = [(a["action"], a["type"]) for a in after["janitor"]["actions"]]
    assert actions == [("terminate", "batch:job"), ("archive", "fsx:file-system"),
                       ("retain", "fsx:file-system")]
    (kept,) = after["retained_resources"]
    assert after["leaked_resources"] == [] and kept["expires_at"] > emulator.now_iso()
    fs = emulator.client("fsx").describe_file_systems()["FileSystems"][0]
    tags = {t["Key"]: t["Value"] for t in fs["Tags"]}
    assert tags["traingrid:retained"] == "janitor-archive-failed"
    # Its outputs are still there, on the file system, and nothing was deleted.
    files = fsx_backends[ACCOUNT_ID][emulator.region].file_systems[fs["FileSystemId"]].files
    assert any(path.endswith("checkpoints/epoch-0001.pt") for path in files)
    assert unsafe_deletions(emulator) == []
    # Later passes leave it until its expiry.
    assert schedules.fire(emulator, deployment.stack, "janitor")["released"] == []
    janitor = deployment.stack.resources["JanitorFunction"]
    assert {"fsx:CreateDataRepositoryTask", "fsx:TagResource"} <= lambda_inprocess.CALLS[janitor]
    assert missing_permissions(deployment.stack, dict(lambda_inprocess.CALLS)) == []
