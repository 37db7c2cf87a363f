"""`traingrid costs`: the recorded receipts of a period's runs, summed by group, and `status`'s
cost line."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from traingrid.db import migrate
from traingrid.db.engine import dispose, transaction
from traingrid.db.repositories import TrainingRunRepository
from traingrid.training.run_record import state_cost as run_cost
from traingrid_local.cli import terminal
from traingrid_local.cli.main import app

runner = CliRunner()
T0 = datetime(2026, 11, 20, tzinfo=UTC)


def state(nodes: int, ran_s: int, instance_type: str = "p3.16xlarge", waited_s: int = 0
          ) -> dict:
    return {"plan": {"job": {"instance_type": instance_type, "attempts": [
        {"attempt": 1, "nodes": nodes, "reason": "first attempt"}]},
        "file_system": {"storage_capacity_gib": 1200,
                        "lustre_configuration": {"DeploymentType": "SCRATCH_2"}},
        "estimate": {"max_usd": 1000.0}},
        "file_system": {"id": "fs-1", "hydrate_s": 0},
        "job": {"id": f"job-{nodes}", "status": "SUCCEEDED", "running_s": ran_s,
                "waiting_s": waited_s}}


@pytest.fixture
def database(tmp_path):
    url = f"sqlite:///{tmp_path / 'campaigns.db'}"
    migrate.upgrade(url)
    runs = [("a", "s3://data/imagenet/", state(2, 3600, waited_s=900), T0),
            ("b", "s3://data/imagenet/", state(4, 1800), T0 + timedelta(hours=1)),
            ("c", "s3://data/coco/", state(1, 3600, "p4d.24xlarge"), T0 + timedelta(days=1)),
            ("d", "s3://data/coco/", None, T0 + timedelta(days=5))]
    with transaction(url) as session:
        for name, dataset, run_state, started in runs:
            cost = run_cost(run_state) if run_state else None
            TrainingRunRepository(session).record({
                "execution_arn": f"arn:aws:states:us-east-1:1:execution:m:{name}", "name": name,
                "status": "SUCCEEDED", "started_at": started,
                "ended_at": started + timedelta(hours=2), "dataset": dataset,
                "instance_type": (run_state or state(1, 0))["plan"]["job"]["instance_type"],
                "recorded_by": "run" if cost else "janitor", "cost": cost,
                "cost_usd": cost and cost["actual"]["total"]})
    yield url
    dispose(url)


def test_costs_sums_each_datasets_runs_in_the_period(database):
    result = runner.invoke(app, ["costs", "--database-url", database, "--since",
                                 "2026-11-20", "--until", "2026-11-22", "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    imagenet, coco = found["groups"]
    # 2 nodes × (15 min in the queue + 1 h) + 4 × 0.5 h of p3.16xlarge at $24.48, plus their
    # file systems: 4 of the 4.5 node-hours paid for trained.
    assert imagenet["dataset"] == "s3://data/imagenet/" and imagenet["runs"] == 2
    assert imagenet["compute"] == 4.5 * 24.48
    assert imagenet["paid_node_hours"] == 4.5 and imagenet["productive_node_hours"] == 4.0
    assert imagenet["goodput"] == round(4 / 4.5, 4) and coco["goodput"] == 1.0
    assert coco["compute"] == 32.7726 and coco["runs"] == 1  # d started after --until
    for group in found["groups"]:
        assert round(sum(group[p] for p in ("compute", "file_system", "orchestration",
                                            "staging")), 6) == group["total"]
    assert found["total"] == round(imagenet["total"] + coco["total"], 6)


def test_costs_by_instance_type_counts_runs_recorded_without_a_cost(database):
    result = runner.invoke(app, ["costs", "--database-url", database, "--by",
                                 "instance_type"])
    assert result.exit_code == 0, result.output
    assert "p4d.24xlarge" in result.stdout and "1 without a cost" in result.stdout
    assert "total: $" in result.stdout
    assert "goodput (productive of paid node-hours): p3.16xlarge 88.9% (4.00 of 4.50); " \
           "p4d.24xlarge 100.0% (1.00 of 1.00)" in result.stdout


def test_costs_lists_every_bad_option_at_once(database):
    result = runner.invoke(app, ["costs", "--database-url", database, "--since", "yesterday",
                                 "--by", "colour"])
    assert result.exit_code == 2
    assert "--since 'yesterday' is not an ISO 8601" in result.stderr
    assert "--by 'colour'" in result.stderr


def test_status_shows_the_receipt_beside_the_estimate():
    cost = run_cost(state(2, 3600))
    line = terminal.cost_line(cost)
    assert line.startswith(f"cost: ${cost['actual']['total']:,.2f} (compute $48.96, ")
    assert "estimated at most $1,000.00" in line and cost["prices_version"] in line
    assert line.endswith(" · goodput 100.0% (2.00 of 2.00 node-hours productive)")
    waited = terminal.cost_line(run_cost(state(2, 3600, waited_s=1200)))
    assert waited.endswith("goodput 75.0% (2.00 of 2.67 node-hours productive; lost: queue "
                           "0.67)")
    assert terminal.cost_line({**cost, "in_flight": True}).startswith("cost so far: ")


def test_costs_by_campaign_counts_the_fanouts_receipts_in_the_periods_total(database):
    from traingrid.costs import receipt
    from traingrid.costs.prices import Price
    from traingrid.db.repositories import CampaignRepository, RunRepository

    arn = "arn:aws:states:us-east-1:1:execution:fanout:sf-1"
    job = receipt.SageMakerUse("us-east-1", "sf-1-us-east-1", "ml.p3.16xlarge", 2, 3600, 3600,
                               Price(28.152, "instance-hour", "campaign database"))
    cost = receipt.receipt(receipt.Usage(fanout=True, sagemaker=[job]), None)
    with transaction(database) as session:
        CampaignRepository(session).ensure("sf-2026-11")
        RunRepository(session).start("sf-2026-11", "sf-1", arn, "data-local",
                                     T0 + timedelta(hours=3))
        RunRepository(session).record_cost(arn, cost)
    found = json.loads(runner.invoke(app, [
        "costs", "--database-url", database, "--until", "2026-11-22", "--by", "campaign",
        "--json"]).stdout)
    groups = {group["campaign"]: group for group in found["groups"]}
    campaign, training = groups["sf-2026-11"], groups["-"]  # TrainingRuns: no campaign
    assert campaign["campaign"] == "sf-2026-11" and campaign["compute"] == 2 * 28.152
    assert campaign["pipelines"] == {"CampaignFanout": 1} and training["campaign"] == "-"
    assert found["total"] == round(campaign["total"] + training["total"], 6)
    result = runner.invoke(app, ["costs", "--database-url", database, "--by", "pipeline"])
    assert result.exit_code == 0, result.output
    assert "CampaignFanout" in result.stdout and "TrainingRun" in result.stdout
