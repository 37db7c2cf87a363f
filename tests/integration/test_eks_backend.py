"""The TrainingRun on the EKS backend, end to end on the emulator: a stack deployed with
EksClusterName (the emulated user's cluster) trains through the same plan, attempts, waits,
archive and cleanup as on ECS, its nodes pods of the EKS job definition, submitted with
``eksPropertiesOverride``; the scenarios that exercise attempts (a lost node, capacity that
shrinks) hold, and so do fault-matrix cells at the EKS SubmitJob state and during training."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.eks_shapes import batch_problems, pod_of, pod_problems
from traingrid_local.demo import fault_matrix
from traingrid_local.demo.fault_matrix import Cell
from traingrid_local.demo.runner import (
    DATASET_PREFIX,
    SCENARIOS,
    manifest_body,
    upload_sample_dataset,
    wait_for_runs,
)
from traingrid_local.emulator.session import Emulator
from traingrid_local.stack import eks_cluster, report
from traingrid_local.stack.environment import DEMO_BUCKET, Deployment, deploy_traingrid

pytestmark = pytest.mark.e2e
SPEED = 4000.0


@pytest.fixture(scope="module")
def on_eks(tmp_path_factory) -> Iterator[tuple[Emulator, Deployment]]:
    database = tmp_path_factory.mktemp("eks") / "campaigns.sqlite"
    with Emulator(speed=SPEED, training_seconds={"batch": 3600}) as emulator:
        deployment = deploy_traingrid(emulator, database_url=f"sqlite:///{database}",
                                      parameters=eks_cluster.stand_up(emulator),
                                      regions=("us-east-1",))
        upload_sample_dataset(emulator)
        try:
            yield emulator, deployment
        finally:
            deployment.close()


def train(on_eks: tuple[Emulator, Deployment], scenario: str,
          **request: Any) -> dict[str, Any]:
    """One run of ``scenario`` (its faults, its request and ``request``'s fields) on the EKS
    stack; its report entry."""
    emulator, deployment = on_eks
    machine = deployment.stack.outputs["TrainingRunStateMachineArn"]
    sfn = emulator.client("stepfunctions")
    before = {e["executionArn"] for e in sfn.list_executions(stateMachineArn=machine)[
        "executions"]}
    emulator.set_faults(SCENARIOS[scenario].faults, SCENARIOS[scenario].state_faults)
    try:
        body = manifest_body(SCENARIOS[scenario], json.dumps(
            {"name": f"eks-{scenario}", **request}).encode())
        emulator.client("s3").put_object(Bucket=DEMO_BUCKET, Key=f"{DATASET_PREFIX}"
                                         f"manifest.json", Body=body)
        arns = [a for a in wait_for_runs(emulator, [machine], 120, None) if a not in before]
    finally:
        emulator.set_faults()
    (execution,) = report.build(emulator, deployment, arns)["executions"]
    return dict(execution)


def submitted_jobs(on_eks: tuple[Emulator, Deployment], execution: dict[str, Any]
                   ) -> list[dict[str, Any]]:
    """The run's Batch jobs (named after it), oldest first."""
    emulator, deployment = on_eks
    batch = emulator.client("batch")
    queue = deployment.stack.outputs["TrainingJobQueueArn"]
    ids = [j["jobId"] for status in ("SUCCEEDED", "FAILED")
           for j in batch.list_jobs(jobQueue=queue, jobStatus=status)["jobSummaryList"]
           if j["jobName"] == execution["name"]]
    return sorted(batch.describe_jobs(jobs=ids)["jobs"], key=lambda j: j["createdAt"])


def test_a_run_trains_on_the_clusters_pods_and_cleans_up(on_eks):
    emulator, deployment = on_eks
    execution = train(on_eks, "happy")
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    assert execution["cleanup"] is not None  # the same report as on ECS
    (job,) = submitted_jobs(on_eks, execution)
    definition = emulator.client("batch").describe_job_definitions(
        jobDefinitions=[job["jobDefinition"]])["jobDefinitions"][0]
    (node_range,) = definition["nodeProperties"]["nodeRangeProperties"]
    assert "container" not in node_range
    # What the emulated stack registered is a valid Batch request and a valid pod.
    registered = {k: v for k, v in definition.items()
                  if k in ("jobDefinitionName", "type", "nodeProperties", "retryStrategy")}
    assert batch_problems("RegisterJobDefinition", registered) == ""
    assert pod_problems(pod_of(node_range["eksProperties"]["podProperties"])) == []
    # Batch describes the attempts as pods; the run read the exit code from them.
    assert job["eksAttempts"][0]["containers"][0]["exitCode"] == 0 and job["attempts"] == []
    history = emulator.client("stepfunctions").get_execution_history(
        executionArn=execution["execution_arn"], maxResults=1000)["events"]
    entered = {e["stateEnteredEventDetails"]["name"] for e in history
               if "stateEnteredEventDetails" in e}
    assert "SubmitTrainingPods" in entered and "SubmitTrainingJob" not in entered
    assert not report.build(emulator, deployment, [execution["execution_arn"]])[
        "leaked_resources"]


def test_seed_001_elastic_torchrun_on_p4d_pods_with_efa_and_fsx(on_eks):
    """The mission's seed 001: TorchElastic on EKS, 3 × p4d.24xlarge with EFA, data on FSx."""
    emulator, _ = on_eks
    execution = train(on_eks, "happy", name="seed-001", instance_type="p4d.24xlarge",
                      nodes=3, min_nodes=2)
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    history = emulator.client("stepfunctions").get_execution_history(
        executionArn=execution["execution_arn"], maxResults=1000)["events"]
    (scheduled,) = [json.loads(e["taskScheduledEventDetails"]["parameters"]) for e in history
                    if e["type"] == "TaskScheduled"
                    and e["taskScheduledEventDetails"]["resource"] == "submitJob"]
    (override,) = scheduled["NodeOverrides"]["NodePropertyOverrides"]
    (container,) = override["EksPropertiesOverride"]["PodProperties"]["Containers"]
    env = {e["Name"]: e["Value"] for e in container["Env"]}
    assert (scheduled["NodeOverrides"]["NumNodes"], override["InstanceTypes"]) == (
        3, ["p4d.24xlarge"])
    # EFA: the host's devices, seen by the privileged container (no device plugin resource,
    # which Batch does not take for an EKS container).
    assert "vpc.amazonaws.com/efa" not in container["Resources"]["Limits"]
    assert container["Resources"]["Limits"]["nvidia.com/gpu"] == "8"
    assert env["TRAINGRID_EFA_DEVICES"] == "4" and env["TRAINGRID_SSH_PORT"] == "2222"
    assert (env["TRAINGRID_LAUNCHER"], env["TRAINGRID_MIN_NODES"]) == ("torchrun", "2")
    assert env["FSX_DNS_NAME"] and env["FSX_MOUNT_NAME"]
    (job,) = submitted_jobs(on_eks, execution)
    assert job["nodeProperties"]["numNodes"] == 3


def test_a_lost_node_resumes_from_its_checkpoint_on_eks(on_eks):
    execution = train(on_eks, "node-lost")
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    first, second = execution["attempts"]
    assert first["outcome"].startswith("node lost")
    assert second["resumed_from"] == "/fsx/outputs/checkpoints/epoch-0001.pt"


def test_capacity_that_shrinks_shrinks_the_pods_too(on_eks):
    execution = train(on_eks, "capacity-shrink")
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    assert [a["nodes"] for a in execution["attempts"]] == [20, 10, 5]
    last = submitted_jobs(on_eks, execution)[-1]
    assert last["nodeProperties"]["numNodes"] == 5


def test_fault_matrix_cells_on_eks_end_as_expected_with_nothing_leaked(on_eks):
    cells = [Cell("training", "SubmitTrainingPods", "service-error", "eks"),
             Cell("training", "AwaitTrainingJob", "abort", "eks")]
    assert set(cells) <= set(fault_matrix.cells(["training"], backend="eks"))
    assert not any(c.state == "SubmitTrainingJob"
                   for c in fault_matrix.cells(["training"], backend="eks"))
    # The whole matrix runs EKS's SubmitJob state on an EKS deployment, the rest on ECS.
    assert {c.backend for c in fault_matrix.cells(["training"])
            if c.state == "SubmitTrainingPods"} == {"eks"}
    for cell in cells:  # on this module's EKS deployment (fault_matrix.run makes its own)
        result = fault_matrix.run_cell(*on_eks, cell)
        assert result.ok, (result.cell, result.problems)
        assert result.status == result.cell.expected


def test_batch_refuses_container_overrides_for_pods(on_eks):
    emulator, deployment = on_eks
    definition = deployment.stack.resources["TrainingEksJobDefinition"]
    with pytest.raises(emulator.client("batch").exceptions.ClientException,
                       match="eksPropertiesOverride"):
        emulator.client("batch").submit_job(
            jobName="wrong-shape", jobQueue=deployment.stack.outputs["TrainingJobQueueArn"],
            jobDefinition=definition, nodeOverrides={"numNodes": 2, "nodePropertyOverrides": [
                {"targetNodes": "0:", "containerOverrides": {"command": ["true"]}}]})


def test_the_compute_environment_is_of_type_eks_on_a_cluster_that_exists(on_eks):
    from moto.batch.exceptions import ClientException
    from moto.batch.models import batch_backends

    from traingrid_local.emulator import batch_pods
    from traingrid_local.emulator.session import ACCOUNT_ID

    emulator, deployment = on_eks
    name = deployment.stack.resources["TrainingComputeEnvironment"]
    (described,) = emulator.client("batch").describe_compute_environments(
        computeEnvironments=[name])["computeEnvironments"]
    assert described["containerOrchestrationType"] == "EKS"
    assert described["eksConfiguration"] == {
        "eksClusterArn": f"arn:aws:eks:us-east-1:{ACCOUNT_ID}:cluster/"
                         f"{eks_cluster.DEMO_CLUSTER}",
        "kubernetesNamespace": eks_cluster.DEMO_NAMESPACE}
    environment = next(iter(batch_backends[ACCOUNT_ID]["us-east-1"]
                            ._compute_environments.values()))
    with pytest.raises(ClientException, match="not found"):
        batch_pods.attach_eks_configuration(environment, {
            "eksClusterArn": f"arn:aws:eks:us-east-1:{ACCOUNT_ID}:cluster/nowhere",
            "kubernetesNamespace": "x"}, ACCOUNT_ID, "us-east-1")
