"""A run's cost receipt: the arithmetic, where each figure comes from, and that the parts add
up to the total, from a run's state and from its execution's history."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from traingrid.costs import node_time, prices, receipt
from traingrid.training.run_record import state_cost

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def plan(attempts, instance_type="p3.16xlarge"):
    return {
        "job": {"instance_type": instance_type, "nodes": 20, "attempts": attempts},
        "file_system": {"storage_capacity_gib": 1200,
                        "lustre_configuration": {"DeploymentType": "SCRATCH_2"}},
        "estimate": {"usd_per_hour": 491.21, "max_usd": 35367.12},
    }


# node-lost: the first job lost its host after 20 minutes; the second trained 6 hours.
NODE_LOST = [
    {"attempt": 1, "nodes": 20, "reason": "first attempt", "resumed_from": None,
     "job_id": "job-1", "outcome": "node lost: Host EC2 (instance i-1) terminated.",
     "ran_s": 1200},
    {"attempt": 2, "nodes": 20, "reason": "node lost", "resumed_from": "/fsx/epoch-0001.pt"},
]
ENDED_JOB = {"id": "job-2", "status": "SUCCEEDED", "started": True, "running_s": 21600}


def assert_adds_up(cost):
    actual = cost["actual"]
    assert round(sum(actual[p] for p in receipt.PARTS), 6) == actual["total"]
    for part in receipt.PARTS:
        assert round(sum(line["amount"] for line in cost["lines"] if line["part"] == part),
                     6) == actual[part]
    assert all(line["source"] for line in cost["lines"])


def test_every_attempt_node_hours_and_the_file_system_are_priced():
    usage = receipt.Usage(
        instance_type="p3.16xlarge",
        attempts=receipt.attempts_used(plan(NODE_LOST)["job"], ENDED_JOB),
        file_system=receipt.FileSystemUse("fs-1", "SCRATCH_2", None, 1200, 7 * 3600, "test"),
        transitions=120, lambda_invocations=20)
    cost = receipt.receipt(usage, {"max_usd": 1.0})
    compute = [line for line in cost["lines"] if line["part"] == "compute"]
    # 20 nodes × 1,200 s and 20 × 21,600 s at $24.48 a node-hour.
    assert [line["amount"] for line in compute] == [163.2, 2937.6]
    assert "job-1" in compute[0]["item"] and "Batch" in compute[0]["source"]
    assert cost["actual"]["compute"] == 3100.8
    # 1,200 GiB × 7 h at $0.140/GB-month over 730 h.
    assert cost["actual"]["file_system"] == round(1200 * 7 * 0.140 / 730, 6)
    assert cost["actual"]["orchestration"] == round(120 * 0.025 / 1000, 6) + round(
        20 * prices.LAMBDA_INVOCATION.usd, 6)
    assert cost["actual"]["staging"] == 0
    assert cost["prices_version"] == prices.VERSION and cost["currency"] == "USD"
    assert cost["estimate"] == {"max_usd": 1.0}
    assert_adds_up(cost)


def test_a_job_already_closed_in_the_attempts_is_not_counted_twice():
    # Between NextAttempt and the resubmission the state's job is still the failed one.
    failed = {"id": "job-1", "status": "FAILED", "running_s": 1200}
    used = receipt.attempts_used(plan(NODE_LOST)["job"], failed)
    assert [(a.attempt, a.seconds) for a in used] == [(1, 1200)]


def test_a_running_job_counts_so_far():
    running = {"id": "job-2", "status": "RUNNING", "running_s": 600}
    used = receipt.attempts_used(plan(NODE_LOST)["job"], running)
    assert used[-1] == receipt.AttemptUse(2, 20, 600, "job-2", running=True)
    cost = receipt.receipt(receipt.Usage("p3.16xlarge", used), None)
    assert "so far" in cost["lines"][-3]["item"]


def test_a_figure_without_a_price_says_so_and_adds_nothing():
    usage = receipt.Usage(instance_type="x9.huge",
                          attempts=[receipt.AttemptUse(1, 2, 3600, "job-1")])
    cost = receipt.receipt(usage, None)
    assert cost["actual"]["total"] == 0
    assert "no price for 'x9.huge'" in cost["lines"][0]["source"]
    assert cost["lines"][1]["quantity"] is None  # transitions not counted: said where
    assert_adds_up(cost)


def test_persistent_file_systems_are_priced_at_their_throughput():
    assert prices.file_system_gb_hour("PERSISTENT_1", 200).usd == pytest.approx(0.290 / 730)
    assert prices.file_system_gb_hour("PERSISTENT_1", 75) is None
    assert "SCRATCH_2" in prices.file_system_gb_hour("SCRATCH_2", None).source


def event(kind, at, name, **details):
    key = "stateEnteredEventDetails" if kind.endswith("Entered") else "stateExitedEventDetails"
    payload = {"name": name, **{k: json.dumps(v) for k, v in details.items()}}
    return {"type": kind, "timestamp": T0 + timedelta(seconds=at), key: payload}


def history(deleted=True):
    state = {"plan": plan(NODE_LOST), "file_system": {"id": "fs-1", "hydrate_s": 300},
             "job": ENDED_JOB}
    events = [
        event("TaskStateEntered", 0, "Plan", input={}),
        event("TaskStateEntered", 10, "CreateFileSystem", input={}),
        {"type": "TaskScheduled", "timestamp": T0,
         "taskScheduledEventDetails": {"resourceType": "lambda"}},
        {"type": "LambdaFunctionScheduled", "timestamp": T0},
        event("TaskStateEntered", 3600, "DeleteFileSystem", input=state),
    ]
    if deleted:
        events.append(event("TaskStateExited", 7210, "DeleteFileSystem", output=state))
    return events


def test_from_history_measures_the_file_system_and_counts_the_orchestration():
    usage = receipt.from_history(history(), T0 + timedelta(hours=3), False,
                                 lambda a, b: (b - a).total_seconds())
    assert usage.file_system.seconds == 7200  # created → deleted
    assert usage.transitions == 3 and usage.lambda_invocations == 2
    assert [a.seconds for a in usage.attempts] == [1200, 21600]
    kept = receipt.from_history(history(deleted=False), T0 + timedelta(hours=3), False,
                                lambda a, b: (b - a).total_seconds())
    assert kept.file_system.seconds == 3 * 3600 - 10
    assert "not deleted by the run" in kept.file_system.source


def test_the_record_step_prices_what_the_state_measured():
    state = {"plan": plan(NODE_LOST), "file_system": {"id": "fs-1", "hydrate_s": 300},
             "job": ENDED_JOB}
    cost = state_cost(state)
    assert cost["actual"]["compute"] == 3100.8
    fs = next(line for line in cost["lines"] if line["part"] == "file_system")
    assert fs["quantity"] == round(1200 * (300 + 1200 + 21600) / 3600, 6)
    assert cost["estimate"]["max_usd"] == 35367.12
    assert_adds_up(cost)
    # A run that failed before its file system existed costs nothing and says why.
    early = state_cost({"plan": plan([{"attempt": 1, "nodes": 20, "reason": "first attempt"}])})
    assert early["actual"]["total"] == 0
    assert_adds_up(early)


def test_sagemaker_bills_its_billable_seconds_and_says_what_spot_saved():
    price = prices.Price(28.152, "instance-hour", "region_prices")
    usage = receipt.Usage(fanout=True, transitions=10, lambda_invocations=2, sagemaker=[
        receipt.SageMakerUse("us-west-2", "job-1", "ml.p3.16xlarge", 10, 1800, 3600, price)],
        staging=[receipt.StagingUse("us-west-2 → us-east-1", 5 * 10**9,
                                    prices.INTER_REGION_TRANSFER)])
    cost = receipt.receipt(usage, None)
    sagemaker = cost["lines"][2]
    assert sagemaker["amount"] == round(10 * 0.5 * 28.152, 6)
    assert "billed 1800 of 3600 s (managed spot saved 50%)" in sagemaker["item"]
    assert cost["actual"]["staging"] == 0.1  # 5 GB at $0.02
    assert_adds_up(cost)
    # Without their jobs looked up, the receipt says the SageMaker time is not in it.
    unknown = receipt.receipt(receipt.fanout_usage([], {"jobs": []}, False), None)
    assert [line["item"] for line in unknown["lines"] if line["quantity"] is None] == [
        "SageMaker training jobs"]


def test_an_ended_fanout_is_priced_from_its_recorded_regions_and_one_in_flight_is_not():
    from dataclasses import replace

    from traingrid.costs.region_usage import recorded
    from traingrid.runs import view

    price = prices.Price(30.47, "instance-hour", "region_prices p3 in eu-west-1")
    job = receipt.SageMakerUse("eu-west-1", "job-1", "ml.p3.16xlarge", 2, 3600, 3600, price)
    staged = receipt.StagingUse("us-west-2 → eu-west-1", 10**10, replace(
        prices.INTER_REGION_TRANSFER, usd=0.05))
    cost = {"regions": recorded(receipt.RegionsUsed([job], [staged]))}
    events = [event("TaskStateEntered", 0, "PlanFanout", input={})]
    described = {"status": "SUCCEEDED", "name": "f", "startDate": T0, "stopDate": T0,
                 "executionArn": "arn:aws:states:us-east-1:1:execution:f:f"}
    ended = view.cost(view.CAMPAIGN_FANOUT, described, events, None, recorded=cost)
    assert ended["actual"]["compute"] == 2 * 30.47 and ended["actual"]["staging"] == 0.5
    assert ended["actual"]["orchestration"] > 0  # still counted in the history
    assert_adds_up(ended)
    running = view.cost(view.CAMPAIGN_FANOUT, described | {"status": "RUNNING"}, events, None,
                        recorded=cost)
    assert running["actual"]["compute"] == 0 and running["in_flight"]


def test_the_apis_view_of_a_run_in_flight_costs_it_so_far():
    from traingrid.runs import view

    running_state = {"plan": plan(NODE_LOST), "file_system": {"id": "fs-1"},
                     "job": {"id": "job-2", "status": "RUNNING", "running_s": 600}}
    events = [event("TaskStateEntered", 0, "CreateFileSystem", input={}),
              event("TaskStateEntered", 1800, "AwaitTrainingJob", input=running_state)]
    described = {"status": "RUNNING", "name": "r", "startDate": T0,
                 "executionArn": "arn:aws:states:us-east-1:1:execution:m:r"}
    cost = view.cost(view.TRAINING_RUN, described, events, {"max_usd": 9.0},
                     lambda a, b: 3600.0)
    assert cost["in_flight"] and cost["estimate"] == {"max_usd": 9.0}
    assert [line["item"].endswith("so far (job job-2)") for line in cost["lines"]
            if line["part"] == "compute"] == [False, True]
    fs = next(line for line in cost["lines"] if line["part"] == "file_system")
    assert fs["quantity"] == 1200.0 and "still up" in fs["source"]
    assert_adds_up(cost)


def test_batchs_own_timestamps_replace_what_the_run_measured():
    # A stopped run's state still says the job had not started; Batch knows it ran 30 min.
    used = receipt.attempts_used(plan(NODE_LOST)["job"],
                                 {"id": "job-2", "status": "STARTING", "running_s": 0})
    described = [{"jobId": "job-1", "startedAt": 1_000_000, "stoppedAt": 2_200_000},
                 {"jobId": "job-2", "startedAt": 5_000_000, "stoppedAt": 6_800_000}]
    usage = receipt.with_batch_times(receipt.Usage("p3.16xlarge", used), described, 9_000_000)
    assert [(a.seconds, a.running) for a in usage.attempts] == [(1200, False), (1800, False)]
    assert usage.attempts[1].source == receipt.BATCH_TIMES
    running = receipt.with_batch_times(receipt.Usage("p3.16xlarge", used), [
        {"jobId": "job-2", "startedAt": 5_000_000}], 5_600_000)
    assert [(a.seconds, a.running) for a in running.attempts] == [(1200, False), (600, True)]
    assert "as the run measured it" in running.attempts[0].source  # Batch no longer has it


def test_the_queue_wait_is_billed_and_goodput_says_where_the_node_hours_went():
    # job-1 waited 5 min, ran 20 min and lost a node; job-2 waited 10 min, then trained 6 h,
    # 2 min of it in-job recovery after a lost worker (as the job reported it).
    used = receipt.attempts_used(plan(NODE_LOST)["job"],
                                 {"id": "job-2", "status": "SUCCEEDED", "running_s": 0},
                                 {"recovery": 20 * 120, "bogus": 9})
    assert used[1].phases == {"recovery": 20 * 120}  # node-seconds
    described = [{"jobId": "job-1", "createdAt": 700_000, "startedAt": 1_000_000,
                  "stoppedAt": 2_200_000},
                 {"jobId": "job-2", "createdAt": 4_400_000, "startedAt": 5_000_000,
                  "stoppedAt": 26_600_000}]
    usage = receipt.with_batch_times(receipt.Usage("p3.16xlarge", used), described, 30_000_000)
    cost = receipt.receipt(usage, None)
    assert_adds_up(cost)
    price = prices.instance_hour("p3.16xlarge").usd
    waits = [line for line in cost["lines"] if "in the queue" in line["item"]]
    assert [line["quantity"] for line in waits] == [round(20 * 300 / 3600, 6),
                                                    round(20 * 600 / 3600, 6)]
    assert all("createdAt → startedAt" in line["source"] for line in waits)
    paid_s = 20 * (300 + 1200 + 600 + 21600)
    assert cost["actual"]["compute"] == pytest.approx(paid_s / 3600 * price, abs=1e-5)
    good = cost["goodput"]
    assert good["paid_node_hours"] == round(paid_s / 3600, 6)
    assert good["lost_node_hours"] == {
        "queue": round(20 * 900 / 3600, 6), "boot": 0.0, "hydration": 0.0, "preflight": 0.0,
        "lost_work": round(20 * 1200 / 3600, 6), "recovery": round(20 * 120 / 3600, 6),
        "export": 0.0}
    productive_s = 20 * (21600 - 120)
    assert good["productive_node_hours"] == round(productive_s / 3600, 6)
    assert good["goodput"] == round(productive_s / paid_s, 4)


def test_a_failed_preflight_is_preflight_not_lost_work_and_nothing_paid_has_no_goodput():
    from traingrid.costs.goodput import goodput

    first = receipt.AttemptUse(1, 4, 150, "job-1", waited_s=60,
                               outcome="exit 75: node 2's bus bandwidth 0.4 GB/s")
    second = receipt.AttemptUse(2, 4, 3600, "job-2", waited_s=40)
    found = goodput([first, second])
    assert found["lost_node_hours"]["preflight"] == round(4 * 150 / 3600, 6)
    assert found["lost_node_hours"]["lost_work"] == 0.0
    assert found["goodput"] == round(3600 / (60 + 150 + 40 + 3600), 4)
    assert goodput([])["goodput"] is None


def test_a_worker_node_lost_mid_job_is_paid_to_its_loss_and_its_recovery_is_not_productive():
    from traingrid.training import recoveries

    # job-2: 20 nodes for 6 h; node 19's host went 20 minutes in; the 19 left recovered in
    # 60 s and trained again the 5 minutes since the checkpoint (as the trainer reported).
    reported = recoveries.read({"recoveries": [{
        "nodes_before": 20, "nodes_after": 19, "world_size_before": 160,
        "world_size_after": 152, "recovery_s": 60.0, "lost_work_s": 300.0,
        "steps_lost": 732}]}, recoveries.Bounds(nodes=20, seconds=21600)).phases
    assert reported == {"recovery": 19 * 60, "lost_work": 20 * 300}
    used = receipt.attempts_used(plan(NODE_LOST)["job"],
                                 {"id": "job-2", "status": "SUCCEEDED", "running_s": 0},
                                 reported)
    job = {"jobId": "job-2", "createdAt": 4_400_000, "startedAt": 5_000_000,
           "stoppedAt": 26_600_000, "nodeProperties": {"numNodes": 20, "mainNode": 0}}
    lost_at = 5_000_000 + 1_200_000
    # The workers start once the main node runs: each is paid from the job's start all the
    # same (its instance was launched with the main node's).
    nodes = [{"jobId": f"job-2#{i}", "status": "SUCCEEDED",
              "startedAt": 5_000_000 + (180_000 if i else 0),
              "stoppedAt": 26_600_000 + 2_000} for i in range(19)]
    nodes.append({"jobId": "job-2#19", "status": "FAILED", "startedAt": 5_000_000,
                  "stoppedAt": lost_at, "statusReason": "Host EC2 (instance i-1) terminated."})
    described = [{"jobId": "job-1", "startedAt": 1_000_000, "stoppedAt": 2_200_000}, job]
    assert node_time.node_ids(described) == [f"job-2#{i}" for i in range(20)]
    usage = receipt.with_batch_times(receipt.Usage("p3.16xlarge", used), described,
                                     30_000_000, nodes)
    second = usage.attempts[1]
    assert (second.node_seconds, second.nodes_lost) == (19 * 21600 + 1200, 1)
    assert usage.attempts[0].node_seconds is None  # not described node by node: nodes × time
    cost = receipt.receipt(usage, None)
    assert_adds_up(cost)
    line = next(li for li in cost["lines"] if li["item"].startswith("attempt 2: 20 ×"))
    assert line["quantity"] == round((19 * 21600 + 1200) / 3600, 6)
    assert "1 node(s) lost mid-job" in line["item"] and "of each node" in line["source"]
    good = cost["goodput"]
    assert good["lost_node_hours"]["recovery"] == round(19 * 60 / 3600, 6)
    assert good["lost_node_hours"]["lost_work"] == round((20 * 1200 + 20 * 300) / 3600, 6)
    paid_s = 20 * 600 + 20 * 1200 + 19 * 21600 + 1200
    assert good["paid_node_hours"] == round(paid_s / 3600, 6)


def test_node_times_need_every_node_and_a_failed_job_loses_none():
    job = {"jobId": "j", "startedAt": 0, "stoppedAt": 600_000,
           "nodeProperties": {"numNodes": 3}}
    some = [{"jobId": "j#0", "startedAt": 0, "stoppedAt": 600_000}]
    assert node_time.of_job(job, some, 0) is None
    failed = [{"jobId": f"j#{i}", "status": "FAILED", "startedAt": 0, "stoppedAt": 600_000}
              for i in range(3)]
    assert node_time.of_job(job, failed, 0) == node_time.NodeTime(1800, 0)
    # A worker that failed early on a healthy host: its instance is up to the job's end.
    crashed = [{"jobId": "j#0", "status": "SUCCEEDED"}, {"jobId": "j#1", "status": "SUCCEEDED"},
               {"jobId": "j#2", "status": "FAILED", "stoppedAt": 60_000,
                "statusReason": "Essential container in task exited"}]
    assert node_time.of_job(job, crashed, 0) == node_time.NodeTime(1800, 0)
    lost = crashed[:2] + [crashed[2] | {"statusReason": "Host EC2 (instance i-1) terminated."}]
    assert node_time.of_job(job, lost, 0) == node_time.NodeTime(1260, 1)
    # Still running: each node so far; a single-node job has no node ids.
    running = {"jobId": "r", "startedAt": 0, "nodeProperties": {"numNodes": 2}}
    nodes = [{"jobId": "r#0", "startedAt": 0}, {"jobId": "r#1", "startedAt": 10_000}]
    assert node_time.of_job(running, nodes, 70_000) == node_time.NodeTime(140, 0)
    assert node_time.node_ids([{"jobId": "s", "nodeProperties": {"numNodes": 1}}]) == []


def test_a_metrics_document_without_readable_recoveries_reports_nothing():
    from traingrid.training import recoveries

    bounds = recoveries.Bounds(nodes=4, seconds=3600)
    assert recoveries.read(None, bounds).phases == {}
    assert recoveries.read({"recoveries": []}, bounds) == recoveries.Reported()
    unread = recoveries.read({"recoveries": [{"nodes_before": 2, "recovery_s": "x"}]}, bounds)
    assert unread.phases == {} and len(unread.ignored) == 3  # recovery_s, lost_work_s, after
