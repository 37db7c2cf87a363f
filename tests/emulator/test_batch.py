"""AWS Batch multi-node jobs that queue, start, run and end over simulated time, with the
training container's outputs written to the run's FSx file system."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.fsx.models import fsx_backends

from traingrid.training.capacity import diagnose
from traingrid.vocabulary.catalog import INSTANCE_TYPES as INSTANCE_TYPES_CATALOG
from traingrid.vocabulary.catalog import resource_requirements
from traingrid_local.emulator import batch, capacity, workload
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.instances import fits_a_node
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator
from traingrid_node.metrics import problems

from .conftest import StartEmulator
from .helpers import (
    BatchSetup,
    create_batch,
    create_lustre,
    create_role,
    create_state_machine,
    describe_job,
    environment_override,
    wait_for_job,
    wait_until,
)

ORDER = ["SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"]
QUEUED_SECONDS = sum(seconds for _, seconds in batch.QUEUE_TIMELINE)


@pytest.fixture
def short_training(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(batch, "TRAINING_SECONDS", 300)
    return 300


def _submit(emulator: Emulator, setup: BatchSetup, name: str = "run-1",
            overrides: dict[str, Any] | None = None) -> str:
    return emulator.client("batch").submit_job(
        jobName=name, jobQueue=setup.job_queue_arn, jobDefinition=setup.job_definition_arn,
        **({"nodeOverrides": overrides} if overrides is not None else {}),
    )["jobId"]


def test_a_job_moves_through_its_states_on_the_simulated_clock(
    start_emulator: StartEmulator, short_training: float
) -> None:
    # 2000 simulated seconds per real second: queued for ~0.16 s, then trains for ~0.15 s.
    emulator = start_emulator(speed=2000)
    setup = create_batch(emulator)
    job_id = _submit(emulator, setup)
    seen: list[str] = []

    def ended() -> bool:
        status = describe_job(emulator, job_id)["status"]
        if not seen or seen[-1] != status:
            seen.append(status)
        return status in ("SUCCEEDED", "FAILED")

    wait_until(ended, interval=0.002, what="the job to end")

    assert seen[0] in ("SUBMITTED", "PENDING", "RUNNABLE")
    assert seen == sorted(seen, key=ORDER.index)
    assert {"RUNNABLE", "STARTING", "RUNNING"} <= set(seen)
    assert seen[-1] == "SUCCEEDED"


def test_a_finished_job_reports_its_times_and_attempt(
    emulator: Emulator, short_training: float
) -> None:
    job_id = _submit(emulator, create_batch(emulator))

    job = wait_for_job(emulator, job_id)

    assert job["status"] == "SUCCEEDED"
    assert job["startedAt"] - job["createdAt"] == pytest.approx(QUEUED_SECONDS * 1000, abs=1)
    assert job["stoppedAt"] - job["startedAt"] == pytest.approx(short_training * 1000, abs=1)
    assert job["container"]["exitCode"] == 0
    [attempt] = job["attempts"]
    assert attempt["container"]["exitCode"] == 0
    assert (attempt["startedAt"], attempt["stoppedAt"]) == (job["startedAt"], job["stoppedAt"])
    assert "statusReason" not in job


def test_a_running_job_has_a_start_but_no_end(start_emulator: StartEmulator) -> None:
    emulator = start_emulator()  # six simulated hours of training take ~0.2 s
    job_id = _submit(emulator, create_batch(emulator))

    job = wait_until(lambda: (j := describe_job(emulator, job_id))["status"] == "RUNNING" and j,
                     what="the job to run")

    assert "startedAt" in job and "stoppedAt" not in job
    assert "exitCode" not in job["container"]
    assert len(job["attempts"]) == 1 and "stoppedAt" not in job["attempts"][0]


def test_node_count_comes_from_the_overrides_or_the_definition(emulator: Emulator) -> None:
    setup = create_batch(emulator, num_nodes=20)

    overridden = _submit(emulator, setup, "run-2", {"numNodes": 2})
    default = _submit(emulator, setup, "run-20")

    assert describe_job(emulator, overridden)["nodeProperties"]["numNodes"] == 2
    assert describe_job(emulator, default)["nodeProperties"]["numNodes"] == 20
    definition = emulator.client("batch").describe_job_definitions(
        jobDefinitions=[setup.job_definition_arn])["jobDefinitions"][0]
    assert definition["nodeProperties"]["numNodes"] == 20


def test_terminating_a_runnable_job_fails_it_with_the_reason(
    start_emulator: StartEmulator,
) -> None:
    # 100 simulated seconds per real second: RUNNABLE from 0.15 s to 1.35 s.
    emulator = start_emulator(speed=100)
    job_id = _submit(emulator, create_batch(emulator))
    wait_until(lambda: describe_job(emulator, job_id)["status"] == "RUNNABLE",
               what="the job to be runnable")

    emulator.client("batch").terminate_job(jobId=job_id, reason="cancelled by the operator")
    job = describe_job(emulator, job_id)

    assert job["status"] == "FAILED"
    assert job["statusReason"] == "cancelled by the operator"
    assert "startedAt" not in job
    assert "stoppedAt" in job
    assert job["attempts"] == []


def test_fault_batch_job_failed_exits_the_main_node_non_zero(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(faults={"batch-job-failed"})
    job_id = _submit(emulator, create_batch(emulator))

    job = wait_for_job(emulator, job_id)

    assert job["status"] == "FAILED"
    assert job["container"]["exitCode"] == batch.MAIN_NODE_EXIT_CODE == 1
    assert job["statusReason"] == "Essential container in task exited"
    assert job["attempts"][0]["container"]["exitCode"] == 1
    assert job["stoppedAt"] - job["startedAt"] == pytest.approx(
        batch.FAILING_AFTER_SECONDS * 1000, abs=1)


def test_fault_stuck_runnable_never_starts(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(faults={"stuck-runnable"})
    job_id = _submit(emulator, create_batch(emulator))
    wait_until(lambda: describe_job(emulator, job_id)["status"] == "RUNNABLE",
               what="the job to be runnable")

    # Far longer than queueing and training take without the fault.
    CLOCK.sleep(QUEUED_SECONDS + batch.TRAINING_SECONDS + 600)
    job = describe_job(emulator, job_id)

    assert job["status"] == "RUNNABLE"
    assert "startedAt" not in job and job["attempts"] == []


def _run_outputs(emulator: Emulator, run: str, version: str | None = "2.15",
                 **env: str) -> tuple[dict[str, Any], dict]:
    setup = create_batch(emulator)
    fs = create_lustre(emulator, setup.network.subnet_id, version)
    overrides = environment_override({
        "FSX_DNS_NAME": fs["DNSName"], "OUTPUT_DIR": f"/fsx/runs/{run}",
        "TRAINGRID_RUN": run, "EPOCHS": "90", **env,
    })
    job = wait_for_job(emulator, _submit(emulator, setup, run, overrides))
    files = fsx_backends[ACCOUNT_ID][emulator.region].file_systems[fs["FileSystemId"]].files
    return job, files


def test_a_finished_job_writes_its_outputs_to_its_file_system(
    emulator: Emulator, short_training: float
) -> None:
    job, files = _run_outputs(emulator, "r7", MPI_GPUS="16")

    assert job["status"] == "SUCCEEDED"
    curves = sorted(f for f in files if f.startswith("runs/r7/metrics/"))
    assert curves == [f"runs/r7/metrics/node-{k}.jsonl" for k in range(len(curves))]
    assert len(curves) == job["nodeProperties"]["numNodes"]
    assert sorted(set(files) - set(curves)) == [
        *[f"runs/r7/checkpoints/epoch-{e:04d}.pt" for e in (88, 89, 90)],
        "runs/r7/logs/main-node.log",
        "runs/r7/metrics.json",
        "runs/r7/model/final.pt",
    ]
    metrics = json.loads(files["runs/r7/metrics.json"])
    # The trainer's contract, which the stand-in honours as the trainer does.
    assert problems(metrics) == []
    assert metrics["world_size"] == 16 and metrics["epochs"] == 90
    assert metrics["images_per_second_per_gpu"] == 625
    assert "exit code 0" in files["runs/r7/logs/main-node.log"].decode()


def test_a_failed_job_leaves_its_log_and_checkpoint_but_no_model(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(faults={"batch-job-failed"})

    job, files = _run_outputs(emulator, "r8")

    assert job["status"] == "FAILED"
    assert "runs/r8/checkpoints/epoch-0001.pt" in files
    assert "runs/r8/logs/main-node.log" in files
    assert not any(name.startswith("runs/r8/model/") for name in files)
    assert "exit code 1" in files["runs/r8/logs/main-node.log"].decode()


def test_no_node_mounts_a_lustre_2_10_file_system_so_the_job_exits_65_writing_nothing(
    emulator: Emulator, short_training: float
) -> None:
    from traingrid.training.attempts import FailureKind, classify

    # FSx's default version for SCRATCH_2, which the nodes' 2.15 clients cannot mount.
    job, files = _run_outputs(emulator, "old-lustre", version=None)

    assert job["status"] == "FAILED"
    assert job["container"]["exitCode"] == 65  # traingrid_node's EXIT_MOUNT
    assert job["stoppedAt"] - job["startedAt"] == workload.MOUNT_FAILS_AFTER_SECONDS * 1000
    assert files == {}
    failure = classify({"exit_code": 65, "status_reason": job["statusReason"]})
    assert failure.kind is FailureKind.INFRASTRUCTURE
    account = fsx_backends[ACCOUNT_ID][emulator.region]
    [fs] = account.file_systems.values()
    refusal = workload.mount_refusal(ACCOUNT_ID, emulator.region, {"FSX_DNS_NAME": fs.dns_name})
    assert refusal is not None and "Lustre 2.10" in refusal
    assert "client kernel compatibility" in refusal and "2.15" in refusal


def test_a_job_with_no_training_time_still_writes_its_outputs(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch, "TRAINING_SECONDS", 0)

    job, files = _run_outputs(emulator, "r0")

    assert job["status"] == "SUCCEEDED"
    assert "runs/r0/model/final.pt" in files


def _gpu_environment(emulator: Emulator, setup: BatchSetup, name: str,
                     instance_types: list[str], **more: Any) -> str:
    return emulator.client("batch").create_compute_environment(
        computeEnvironmentName=name, type="MANAGED", state="ENABLED",
        computeResources={
            "type": "EC2", "minvCpus": 0, "maxvCpus": 512, "desiredvCpus": 128,
            "instanceTypes": instance_types, "subnets": [setup.network.subnet_id],
            "securityGroupIds": [setup.network.security_group_id],
            "instanceRole": "training-node", **more,
        },
        serviceRole=setup.role_arn,
    )["computeEnvironmentArn"]


def test_p3_instances_launch_on_an_ami_of_their_own(emulator: Emulator) -> None:
    setup = create_batch(emulator)
    _gpu_environment(emulator, setup, "warm-pool", ["p3.16xlarge"], ec2Configuration=[
        {"imageType": "ECS_AL2_NVIDIA", "imageIdOverride": "ami-0123456789abcdef0"}])

    instances = [i["InstanceType"]
                 for r in emulator.client("ec2").describe_instances()["Reservations"]
                 for i in r["Instances"]]
    # 128 vCPUs of 64-vCPU p3.16xlarge nodes.
    assert instances == ["p3.16xlarge", "p3.16xlarge"]
    environments = emulator.client("batch").describe_compute_environments()[
        "computeEnvironments"]
    assert {e["computeEnvironmentName"] for e in environments} == {"training-ce", "warm-pool"}


@pytest.mark.parametrize(("instance_types", "configuration"), [
    (["p3.16xlarge", "p4d.24xlarge"], None),  # Batch's default: ECS_AL2023_NVIDIA
    (["p3dn.24xlarge"], [{"imageType": "ECS_AL2023_NVIDIA"}]),
    (["p3dn"], [{"imageType": "ECS_AL2023"}]),  # a family
])
def test_batch_refuses_p3_and_g3_on_its_al2023_ami(
    emulator: Emulator, instance_types: list[str], configuration: list | None,
) -> None:
    """Batch API Reference, Ec2Configuration.imageType: "ECS_AL2023_NVIDIA doesn't support p3
    and g3 instance types"; it is the default for GPU types when no AMI is named."""
    setup = create_batch(emulator)
    more = {"ec2Configuration": configuration} if configuration else {}
    with pytest.raises(ClientError) as refused:
        _gpu_environment(emulator, setup, "old-gpus", instance_types, **more)

    error = refused.value.response["Error"]
    assert error["Code"] == "ClientException"
    assert "doesn't support p3 and g3 instance types" in error["Message"]
    assert "imageIdOverride" in error["Message"]
    assert "p4d" not in error["Message"]
    names = {e["computeEnvironmentName"] for e in emulator.client("batch")
             .describe_compute_environments()["computeEnvironments"]}
    assert names == {"training-ce"}


def test_an_update_to_p3_on_batchs_ami_is_refused(emulator: Emulator) -> None:
    setup = create_batch(emulator)
    batch = emulator.client("batch")
    with pytest.raises(ClientError, match="doesn't support p3 and g3"):
        batch.update_compute_environment(computeEnvironment=setup.compute_environment_arn,
                                         computeResources={"instanceTypes": ["p3.8xlarge"]})
    # With an AMI of its own, and for types the AMI supports, the update goes through.
    batch.update_compute_environment(
        computeEnvironment=setup.compute_environment_arn,
        computeResources={"instanceTypes": ["p3.8xlarge"], "ec2Configuration": [
            {"imageType": "ECS_AL2023_NVIDIA", "imageIdOverride": "ami-0123456789abcdef0"}]})
    batch.update_compute_environment(computeEnvironment=setup.compute_environment_arn,
                                     computeResources={"instanceTypes": ["p5.48xlarge"]})


# --- state-change events --------------------------------------------------------------------

def _record_batch_events(emulator: Emulator) -> str:
    """A rule that starts a pass-through execution per Batch event: its input is the event."""
    role = create_role(emulator, "batch-events", "events.amazonaws.com")
    machine = create_state_machine(emulator, "record-batch-events", {
        "StartAt": "Recorded", "States": {"Recorded": {"Type": "Pass", "End": True}},
    }, role)
    events = emulator.client("events")
    events.put_rule(Name="batch-changes", EventPattern=json.dumps({
        "source": ["aws.batch"], "detail-type": ["Batch Job State Change"]}))
    events.put_targets(Rule="batch-changes", Targets=[{"Id": "recorder", "Arn": machine,
                                                       "RoleArn": role}])
    return machine


def _recorded(emulator: Emulator, machine: str) -> list[dict[str, Any]]:
    sfn = emulator.client("stepfunctions")
    executions = sfn.list_executions(stateMachineArn=machine)["executions"]
    found = [json.loads(sfn.describe_execution(executionArn=e["executionArn"])["input"])
             for e in executions]
    return sorted(found, key=lambda event: ORDER.index(event["detail"]["status"]))


def test_every_status_change_is_announced_when_it_happens(
    start_emulator: StartEmulator, short_training: float
) -> None:
    # 1,000×: a minute of simulated slack is 60 ms of real time, which a loaded machine keeps.
    emulator = start_emulator(speed=1000)
    machine = _record_batch_events(emulator)
    setup = create_batch(emulator)
    job_id = _submit(emulator, setup)
    job = wait_for_job(emulator, job_id)
    wait_until(lambda: len(_recorded(emulator, machine)) == 6,
               what="six state-change events")

    events = _recorded(emulator, machine)
    assert [e["detail"]["status"] for e in events] == ORDER[:6]
    assert all(e["source"] == "aws.batch" and e["detail-type"] == "Batch Job State Change"
               and e["detail"]["jobId"] == job_id and e["resources"] == [job["jobArn"]]
               and e["detail"]["jobQueue"] == setup.job_queue_arn for e in events)
    # Announced at the simulated moment of the change, not when someone looked.
    ended = events[-1]
    assert ended["detail"]["stoppedAt"] == job["stoppedAt"]
    announced = datetime.fromisoformat(ended["time"]).timestamp()
    # (An event's time has whole seconds, so it may read up to a second before the stop.)
    assert -1 < announced - job["stoppedAt"] / 1000 < 60


def test_terminating_a_job_announces_its_failure_at_once(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=50, faults={"stuck-runnable"})
    machine = _record_batch_events(emulator)
    setup = create_batch(emulator)
    job_id = _submit(emulator, setup)
    wait_until(lambda: describe_job(emulator, job_id)["status"] == "RUNNABLE",
               what="the job to queue")

    emulator.client("batch").terminate_job(jobId=job_id, reason="no capacity")

    wait_until(lambda: _recorded(emulator, machine)[-1]["detail"]["status"] == "FAILED",
               what="the FAILED event")
    assert _recorded(emulator, machine)[-1]["detail"]["statusReason"] == "no capacity"


def test_fault_lost_events_announces_nothing(
    start_emulator: StartEmulator, short_training: float
) -> None:
    emulator = start_emulator(speed=5000, faults={"lost-events"})
    machine = _record_batch_events(emulator)
    dropped = batch.DROPPED_EVENTS["count"]

    job = wait_for_job(emulator, _submit(emulator, create_batch(emulator)))

    assert job["status"] == "SUCCEEDED"
    wait_until(lambda: batch.DROPPED_EVENTS["count"] - dropped == 6,
               what="six dropped events")
    assert _recorded(emulator, machine) == []


def test_a_job_terminated_before_it_started_writes_nothing(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(faults={"stuck-runnable"})
    setup = create_batch(emulator)
    fs = create_lustre(emulator, setup.network.subnet_id)
    job_id = _submit(emulator, setup, "r9", environment_override({
        "FSX_DNS_NAME": fs["DNSName"], "OUTPUT_DIR": "/fsx/runs/r9", "TRAINGRID_RUN": "r9"}))
    wait_until(lambda: describe_job(emulator, job_id)["status"] == "RUNNABLE",
               what="the job to queue")

    emulator.client("batch").terminate_job(jobId=job_id, reason="never mind")

    assert describe_job(emulator, job_id)["status"] == "FAILED"
    assert fsx_backends[ACCOUNT_ID][emulator.region].file_systems[fs["FileSystemId"]].files == {}


def test_a_job_asking_a_node_for_more_memory_than_it_registers_is_never_placed(
    emulator: Emulator,
) -> None:
    """What a too-large MEMORY does on AWS (the job waits in RUNNABLE); the plan's never does,
    for any instance type of the catalog."""
    for name, instance in INSTANCE_TYPES_CATALOG.items():
        asked = [{k.lower(): v for k, v in r.items()} for r in resource_requirements(instance)]
        assert fits_a_node(name, asked), name
    assert not fits_a_node("p3.16xlarge", [{"type": "MEMORY", "value": str(488 * 1024)}])
    # What the job definition asked before it was sized by the rule.
    assert not fits_a_node("p3.16xlarge", [{"type": "MEMORY", "value": "491520"}])


def _trainer_job(emulator: Emulator, setup: BatchSetup, run: str,
                 shared_memory_mib: int | None, batch_size: str) -> tuple[dict[str, Any], dict]:
    """The image's trainer on 2 p3.16xlarge nodes (8 ranks each), from a job definition that
    sets ``shared_memory_mib`` of /dev/shm (None: sets nothing, so Docker's 64 MiB)."""
    fs = create_lustre(emulator, setup.network.subnet_id)
    container: dict[str, Any] = {
        "image": "traingrid-mnp:1.0.0", "command": ["python3", "-m", "traingrid_trainer"],
        "environment": [{"name": "FSX_MOUNT_POINT", "value": "/fsx"}]}
    if shared_memory_mib is not None:
        container["linuxParameters"] = {"sharedMemorySize": shared_memory_mib}
    definition = emulator.client("batch").register_job_definition(
        jobDefinitionName=f"trainer-{run}", type="multinode",
        nodeProperties={"numNodes": 2, "mainNode": 0,
                        "nodeRangeProperties": [{"targetNodes": "0:", "container": container}]},
    )["jobDefinitionArn"]
    overrides = {"numNodes": 2, **environment_override({
        "FSX_DNS_NAME": fs["DNSName"], "OUTPUT_DIR": f"/fsx/runs/{run}", "TRAINGRID_RUN": run,
        "EPOCHS": "90", "MPI_GPUS": "16", "BATCH_SIZE": batch_size})}
    job_id = emulator.client("batch").submit_job(
        jobName=run, jobQueue=setup.job_queue_arn, jobDefinition=definition,
        nodeOverrides=overrides)["jobId"]
    files = fsx_backends[ACCOUNT_ID][emulator.region].file_systems[fs["FileSystemId"]].files
    return wait_for_job(emulator, job_id), files


def test_the_trainer_dies_of_a_bus_error_in_dockers_default_shared_memory(
    emulator: Emulator, short_training: float
) -> None:
    from traingrid.training.attempts import FailureKind, classify

    job, files = _trainer_job(emulator, create_batch(emulator), "shm-default", None, "256")

    assert job["status"] == "FAILED"
    assert job["container"]["exitCode"] == 1
    assert job["stoppedAt"] - job["startedAt"] == batch.BUS_ERROR_AFTER_SECONDS * 1000
    log = files["runs/shm-default/logs/main-node.log"].decode()
    assert "bus error" in log.lower() and "/dev/shm has 64 MiB" in log
    assert not any("/checkpoints/" in name for name in files)
    # The training code's failure: another attempt would fail the same way.
    failure = classify({"exit_code": 1, "status_reason": job["statusReason"]})
    assert failure.kind is FailureKind.TRAINING


def test_the_trainer_trains_with_the_shared_memory_its_definition_sets(
    emulator: Emulator, short_training: float
) -> None:
    setup = create_batch(emulator)
    job, _ = _trainer_job(emulator, setup, "shm-sized", 12288, "256")
    assert job["status"] == "SUCCEEDED"

    job, _ = _trainer_job(emulator, setup, "shm-short", 12288, "512")  # 18,816 MiB needed
    assert job["status"] == "FAILED" and job["container"]["exitCode"] == 1


def test_a_job_without_capacity_shows_ec2s_error_in_its_compute_environments_scaling_activity(
    start_emulator: StartEmulator,
) -> None:
    """What AWS says within a minute or two of a job queued without capacity: the group of the
    queue's compute environment fails to launch with EC2's message (diagnosed by the run)."""
    emulator = start_emulator(speed=20, faults={"stuck-runnable"})
    setup = create_batch(emulator)
    job_id = _submit(emulator, setup)
    autoscaling = emulator.client("autoscaling")
    wait_until(lambda: describe_job(emulator, job_id)["status"] == "RUNNABLE",
               what="the job to be runnable")
    assert autoscaling.describe_scaling_activities()["Activities"] == []  # EC2 not answered yet

    CLOCK.sleep(capacity.ACTIVITY_AFTER_S + 5)
    (activity,) = autoscaling.describe_scaling_activities()["Activities"]
    (environment,) = emulator.client("batch").describe_compute_environments()[
        "computeEnvironments"]
    assert activity["AutoScalingGroupName"].startswith(
        f"{environment['computeEnvironmentName']}-asg-")
    assert activity["StatusCode"] == "Failed"
    shortage = diagnose(describe_job(emulator, job_id), [environment], [activity])
    assert shortage is not None and shortage.code == "InsufficientInstanceCapacity"


def test_a_job_that_gets_its_nodes_leaves_no_failed_activity(start_emulator: StartEmulator) -> None:
    emulator = start_emulator()
    job_id = _submit(emulator, create_batch(emulator))
    wait_until(lambda: describe_job(emulator, job_id)["status"] == "RUNNING",
               what="the job to run")
    assert emulator.client("autoscaling").describe_scaling_activities()["Activities"] == []
