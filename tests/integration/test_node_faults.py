"""A node's loss and a hang, as Batch meets them: a worker node's loss leaves the multi-node job
RUNNING on the others, which end it SUCCEEDED on fewer nodes in one attempt; a hung job is
ended by the trainer's watchdog (exit 71, an infrastructure failure) and retried."""

from __future__ import annotations

from traingrid_local.emulator import batch_nodes


def test_a_lost_worker_node_leaves_the_job_running_and_it_succeeds_in_one_attempt(run_scenario):
    outcome = run_scenario("worker-lost")
    execution = outcome.execution
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    (attempt,) = execution["attempts"]
    assert attempt["reason"] == "first attempt"
    batch = outcome.emulator.client("batch")
    queue = outcome.stack.outputs["TrainingJobQueueArn"]
    assert batch.list_jobs(jobQueue=queue, jobStatus="FAILED")["jobSummaryList"] == []
    (done,) = batch.list_jobs(jobQueue=queue, jobStatus="SUCCEEDED")["jobSummaryList"]
    (job,) = batch.describe_jobs(jobs=[done["jobId"]])["jobs"]
    assert job["status"] == "SUCCEEDED"
    nodes = job["nodeProperties"]["numNodes"]
    described = batch.describe_jobs(
        jobs=[f"{job['jobId']}#{i}" for i in range(nodes)])["jobs"]
    lost = [node for node in described if node["status"] == "FAILED"]
    assert [node["nodeDetails"]["nodeIndex"] for node in lost] == [nodes - 1]
    assert lost[0]["statusReason"].startswith("Host EC2 (instance")
    assert lost[0]["stoppedAt"] == job["startedAt"] + batch_nodes.LOST_AFTER_SECONDS * 1000
    assert sum(node["status"] == "SUCCEEDED" for node in described) == nodes - 1
    # It trained on one node fewer after the loss: longer than the plan's training time.
    ran_s = (job["stoppedAt"] - job["startedAt"]) / 1000
    assert ran_s > batch_nodes.LOST_AFTER_SECONDS + batch_nodes.RECOVERY_SECONDS
    record = outcome.record
    assert record["status"] == "SUCCEEDED"
    assert outcome.report["leaked_resources"] == []
    # The receipt pays the lost node to its loss only, and its goodput counts the recovery on
    # the nodes left and the steps trained again on all, as the trainer's metrics.json says.
    cost = execution["cost"]
    assert cost["actual"]["total"] == cost["recorded_total"] == record["cost"]["actual"]["total"]
    line = next(li for li in cost["lines"] if li["item"].startswith("attempt 1:"))
    node_seconds = (nodes - 1) * int(ran_s) + batch_nodes.LOST_AFTER_SECONDS  # whole seconds
    assert line["quantity"] == round(node_seconds / 3600, 6)
    assert "1 node(s) lost mid-job" in line["item"]
    lost = cost["goodput"]["lost_node_hours"]
    assert lost["recovery"] == round((nodes - 1) * batch_nodes.RECOVERY_SECONDS / 3600, 6)
    assert lost["lost_work"] == round(nodes * batch_nodes.LOST_WORK_SECONDS / 3600, 6)
    assert record["cost"]["goodput"] == cost["goodput"]


def test_a_hung_job_is_ended_by_its_watchdog_and_retried(run_scenario):
    outcome = run_scenario("hung-job")
    execution = outcome.execution
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    first, second = execution["attempts"]
    assert first["outcome"] == "exit 71: the training stalled (the watchdog ended it)"
    assert first["ran_s"] == batch_nodes.LOST_AFTER_SECONDS + batch_nodes.HANG_WINDOW_SECONDS
    assert second["reason"] == first["outcome"] and second["resumed_from"]
    assert outcome.report["leaked_resources"] == []
