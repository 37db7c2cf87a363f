"""A TrainingRun's cost receipt in the emulator: every attempt's Batch node-hours (the lost
one's too), the file system's lifetime, the state transitions, as the report, the API's view
and the campaign database give it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from traingrid.costs import receipt
from traingrid.vocabulary.catalog import INSTANCE_TYPES

ROOT = Path(__file__).resolve().parents[2]


def run_cost_schema() -> Draft202012Validator:
    document = yaml.safe_load((ROOT / "schema" / "openapi.yaml").read_text())
    return Draft202012Validator(document["components"]["schemas"]["RunCost"])


def assert_adds_up(cost):
    actual = cost["actual"]
    assert round(sum(actual[part] for part in receipt.PARTS), 6) == actual["total"]


def test_a_lost_nodes_attempt_is_on_the_runs_receipt(run_scenario):
    outcome = run_scenario("node-lost")
    execution = outcome.execution
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    cost = execution["cost"]
    run_cost_schema().validate(cost)
    assert_adds_up(cost)
    assert not cost["in_flight"] and cost["estimate"]["max_usd"] > 0
    first, _ = execution["attempts"]
    batch = outcome.emulator.client("batch")
    (done,) = batch.list_jobs(jobQueue=outcome.stack.outputs["TrainingJobQueueArn"],
                              jobStatus="SUCCEEDED")["jobSummaryList"]
    (second,) = batch.describe_jobs(jobs=[done["jobId"]])["jobs"]
    second_s = (second["stoppedAt"] - second["startedAt"]) // 1000
    price = INSTANCE_TYPES["p4d.24xlarge"].usd_per_hour
    compute = [line for line in cost["lines"] if line["part"] == "compute"]
    ran = [line for line in compute if "in the queue" not in line["item"]]
    # The failed first attempt's 20 minutes on 20 nodes count, then the second job's time.
    assert [line["quantity"] for line in ran] == [round(20 * 1200 / 3600, 6),
                                                  round(20 * second_s / 3600, 6)]
    assert first["job_id"] in ran[0]["item"] and done["jobId"] in ran[1]["item"]
    waited_s = sum(line["quantity"] for line in compute) * 3600 / 20 - 1200 - second_s
    assert cost["actual"]["compute"] == pytest.approx(
        20 * (1200 + second_s + waited_s) / 3600 * price, abs=1e-3)
    (fs,) = [line for line in cost["lines"] if line["part"] == "file_system"]
    capacity = int(re.search(r"SCRATCH_2 (\d+) GiB", fs["item"]).group(1))
    hours = fs["quantity"] / capacity  # its GB-hours over its capacity
    assert (1200 + second_s) / 3600 < hours <= execution["simulated_seconds"] / 3600 + 0.01
    transitions = next(line for line in cost["lines"] if "state transitions" in line["item"])
    assert transitions["quantity"] == execution["state_transitions"]
    # The run recorded its own receipt: the one the API gives once the run has ended, line
    # for line (transitions, each attempt's queue wait and the file system's export included).
    record = outcome.record
    assert record["cost"] == {k: v for k, v in cost.items() if k != "recorded_total"}
    assert cost["recorded_total"] == cost["actual"]["total"]  # as the demo report shows both
    assert float(record["cost_usd"]) == record["cost"]["actual"]["total"] > 0
    waits = [line for line in compute if "in the queue" in line["item"]]
    assert len(waits) == 2 and all(line["quantity"] > 0 for line in waits)
    good = cost["goodput"]
    assert good["lost_node_hours"]["lost_work"] == round(20 * 1200 / 3600, 6)
    assert good["lost_node_hours"]["queue"] == round(sum(w["quantity"] for w in waits), 6)
    assert 0 < good["goodput"] < 1
    assert good["productive_node_hours"] == round(20 * second_s / 3600, 6)


def test_a_fanouts_receipt_prices_each_regions_billable_time_and_its_staging(run_campaign):
    from traingrid.db.engine import transaction
    from traingrid.db.models import RegionPrice

    outcome = run_campaign("sagemaker-capacity")
    (execution,) = outcome.report["executions"]
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    cost = execution["cost"]
    run_cost_schema().validate(cost)
    assert_adds_up(cost)
    assert cost["estimate"]["estimated_usd"] > 0
    lines = {line["item"].split()[1]: line for line in cost["lines"]
             if line["item"].startswith("SageMaker ")}
    assert len(lines) == len(execution["jobs"]) == 4
    with transaction(outcome.deployment.database_url) as session:
        for job in execution["jobs"]:
            ran = outcome.emulator.client("sagemaker", job["region"]).describe_training_job(
                TrainingJobName=job["job_name"])
            price = session.get(RegionPrice, (job["region"], "ml.p3.16xlarge"))
            line = lines[job["job_name"]]
            assert line["quantity"] == round(
                10 * ran["BillableTimeInSeconds"] / 3600, 6), line
            assert line["unit_usd"] == float(price.on_demand_usd_per_hour)
            assert "BillableTimeInSeconds" in line["source"]
    (moved,) = [job for job in execution["jobs"] if job["staged_bytes"]]
    (staging,) = [line for line in cost["lines"] if line["part"] == "staging"]
    assert staging["item"].startswith(f"{moved['requested_region']} → {moved['region']}")
    assert "transfer_usd_per_gb" in staging["source"]
    # The run recorded its regions' receipt when it finished: the report's SageMaker and
    # staging figures, and the API's view of the ended run prices them from that record.
    from traingrid.db.repositories import RunRepository
    from traingrid.runs import view

    with transaction(outcome.deployment.database_url) as session:
        run = RunRepository(session).get(execution["execution_arn"])
        recorded, recorded_usd = run.cost, run.cost_usd
    for part in ("compute", "staging"):
        assert recorded["actual"][part] == cost["actual"][part] > 0
    assert float(recorded_usd) == recorded["actual"]["total"]
    assert_adds_up(recorded)
    sfn = outcome.emulator.client("stepfunctions")
    described = sfn.describe_execution(executionArn=execution["execution_arn"])
    events = sfn.get_execution_history(executionArn=execution["execution_arn"],
                                       maxResults=1000)["events"]
    seen = view.cost(view.CAMPAIGN_FANOUT, described, events, cost["estimate"],
                     recorded=recorded)
    assert seen["actual"]["compute"] == cost["actual"]["compute"]
    assert seen["actual"]["staging"] == cost["actual"]["staging"]
    assert "SageMaker " + execution["jobs"][0]["job_name"] in " ".join(
        line["item"] for line in seen["lines"])
    unrecorded = view.cost(view.CAMPAIGN_FANOUT, described, events, cost["estimate"])
    assert unrecorded["actual"]["compute"] == 0  # without the record: not looked up
