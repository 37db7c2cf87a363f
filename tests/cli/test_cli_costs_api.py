"""`traingrid costs` through the API (`GET /costs`) over real HTTP: the served stack's receipts,
the same groups and sums as read from its database, a deployed stack's API found by --stack."""

from __future__ import annotations

import json
from datetime import timedelta

import boto3
import pytest
from typer.testing import CliRunner

from tests.cli.test_cli_costs import T0, state
from tests.integration.conftest import serving
from traingrid.db.engine import transaction
from traingrid.db.repositories import TrainingRunRepository
from traingrid.training.run_record import state_cost
from traingrid_local.api.client import ApiClient, ApiError
from traingrid_local.cli.main import app

runner = CliRunner()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serving(tmp_path_factory, 600, "costs-api") as api:
        url = api.deployment.database_url
        with transaction(url) as session:
            for name, dataset, run_state, started in (
                    ("cost-a", "s3://data/imagenet/", state(2, 3600), T0),
                    ("cost-b", "s3://data/coco/", state(1, 3600, "p4d.24xlarge"),
                     T0 + timedelta(days=1)),
                    ("cost-c", "s3://data/coco/", state(4, 1800), T0 + timedelta(days=9))):
                cost = state_cost(run_state)
                TrainingRunRepository(session).record({
                    "execution_arn": f"arn:aws:states:us-east-1:1:execution:m:{name}",
                    "name": name, "status": "SUCCEEDED", "started_at": started,
                    "ended_at": started + timedelta(hours=2), "dataset": dataset,
                    "instance_type": run_state["plan"]["job"]["instance_type"],
                    "recorded_by": "run", "cost": cost, "cost_usd": cost["actual"]["total"]})
        yield api


def costs(*options: str) -> dict:
    result = runner.invoke(app, ["costs", *options, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("by", ["dataset", "instance_type", "pipeline"])
def test_costs_through_the_api_are_the_databases_groups_and_sums(served, by):
    period = ("--since", "2026-11-20", "--until", "2026-11-25", "--by", by)
    through_api = costs("--endpoint", served.url, *period)
    from_database = costs("--database-url", served.deployment.database_url, *period)
    assert through_api == from_database
    assert through_api["since"] == "2026-11-20T00:00:00+00:00"
    assert sum(group["runs"] for group in through_api["groups"]) == 2  # cost-c is later
    if by == "dataset":
        imagenet, coco = through_api["groups"]
        assert imagenet["compute"] == 2 * 24.48 and coco["compute"] == 32.7726


def test_the_table_comes_from_the_api_too(served):
    result = runner.invoke(app, ["costs", "--endpoint", served.url, "--by", "instance_type"])
    assert result.exit_code == 0, result.output
    assert "p4d.24xlarge" in result.stdout and "total: $" in result.stdout


def test_the_api_refuses_a_period_that_ends_before_it_starts(served):
    client = ApiClient(served.url, timeout=30)
    with pytest.raises(ApiError) as refused:
        client.get("/costs", since="2026-11-25T00:00:00Z", until="2026-11-20T00:00:00Z")
    assert refused.value.status == 400
    with pytest.raises(ApiError) as bare_date:
        client.get("/costs", since="2026-11-25")
    assert bare_date.value.status == 400 and bare_date.value.problems[0]["pointer"] == "/since"


def test_with_a_stack_the_costs_come_from_its_api_url(served):
    """A deployed stack's API, found in its outputs (here a stack in the emulator's account
    whose ApiUrl is the served API), requests signed."""
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {"ApiUrl": {"Value": served.url}}}
    boto3.client("cloudformation", region_name="us-east-1").create_stack(
        StackName="costs-elsewhere", TemplateBody=json.dumps(template))
    found = costs("--stack", "costs-elsewhere", "--region", "us-east-1", "--by", "pipeline")
    (training,) = found["groups"]
    assert training["pipeline"] == "TrainingRun" and training["runs"] == 3
