"""A fan-out across 50 regions keeps every state far under Step Functions' 256 KB: the plan,
each branch's input, the results, what FinishFanout gets and the execution's output; and what
the workflow adds to its input stays within what the API keeps for it, with every
hyperparameter at its longest (each region's job repeats them)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

from traingrid.aws import sagemaker
from traingrid.campaigns import database_steps
from traingrid.campaigns.trainer_flags import MAX_NUMBER, TRAINER_FLAGS, Flag
from traingrid.db.engine import transaction
from traingrid.db.repositories import (
    CampaignRepository,
    DatasetRepository,
    RegionRepository,
    RunRepository,
)
from traingrid.observability import metrics
from traingrid.runs.submit import STATE_GROWTH
from traingrid.runs.view import CAMPAIGN_FANOUT
from traingrid.settings import PlanningSettings

REGIONS = [f"zz-region{index:02d}-1" for index in range(50)]
ACCOUNT = "123456789012"
EXECUTION = (f"arn:aws:states:us-east-1:{ACCOUNT}:execution:traingrid-CampaignFanout:"
             "av-drive-2026-11-20261121T1300-0123456789ab")
LIMIT = 256 * 1024 * 40 // 100  # "far under" 256 KB: under 40 % of it


def longest(flag: Flag) -> Any:
    """The value of ``flag`` whose JSON is longest."""
    if flag.kind == "choice":
        return max(flag.words, key=len)
    if flag.kind == "integer":
        return MAX_NUMBER
    return 2.2250738585072014e-308 if flag.positive else -2.2250738585072014e-308


LONGEST = {name: longest(flag) for name, flag in TRAINER_FLAGS.items()}


def size(document: Any) -> int:
    return len(json.dumps(document, separators=(",", ":")).encode())


@pytest.fixture
def settings(sqlite_template, tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "testing")
    url = f"sqlite:///{tmp_path / 'campaigns.db'}"
    (tmp_path / "campaigns.db").write_bytes(sqlite_template.read_bytes())
    with transaction(url) as session:
        for region in REGIONS:
            RegionRepository(session).upsert(
                region, enabled=True, transfer_usd_per_gb=0.02,
                artifact_bucket=f"traingrid-artifacts-{ACCOUNT}-{region}",
                prices={"ml.p3.16xlarge": {"on_demand_usd_per_hour": 28.152,
                                           "capacity_instances": 40}})
        CampaignRepository(session).ensure(
            "av-drive-2026-11", hyperparameters={"num_epochs": 90, "batch_size": 256})
        for region in REGIONS:
            DatasetRepository(session).register(
                "av-drive-2026-11", region,
                f"s3://traingrid-campaign-{ACCOUNT}-{region}/campaigns/av-drive-2026-11/"
                f"{region}/drive-2026-11-21/", 1000, 10**12)
    with mock_aws():
        secret = boto3.client("secretsmanager", region_name="us-east-1").create_secret(
            Name=f"db-{tmp_path.name}", SecretString=json.dumps({"url": url}))
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        yield PlanningSettings(database_secret_arn=secret["ARN"])


def completed(job: dict[str, Any], region_moves: int = 3) -> dict[str, Any]:
    """A branch's job at its end: trained after moving a few times, with its artifacts."""
    tried = [{"region": REGIONS[i], "reason": "CapacityError: Unable to provision "
              "requested ML compute capacity. Please retry using a different ML instance "
              "type."} for i in range(region_moves)]
    return job | {"status": "Completed", "tried": tried, "attempt": region_moves + 1,
                  "job_name": "av-drive-2026-11-20261121T1300-0123456789ab-zzr1-4",
                  "job_arn": f"arn:aws:sagemaker:{job['region']}:{ACCOUNT}:training-job/"
                             "av-drive-2026-11-20261121t1300-0123456789ab-zzr1-4",
                  "artifacts": f"s3://traingrid-artifacts-{ACCOUNT}-{job['region']}/campaigns/"
                               "av-drive-2026-11/runs/x/output/model.tar.gz",
                  "started_at": "2026-11-21T13:15:00Z"}


@pytest.mark.parametrize("options", [{}, {"hyperparameters": LONGEST}],
                         ids=["the campaign's", "the longest hyperparameters"])
def test_fifty_regions_keep_every_state_small(settings, monkeypatch, options):
    metrics.clear_metrics()  # Powertools flushes at 100, which needs a namespace
    execution_input = {"campaign": "av-drive-2026-11", "settle_s": 900, "options": options,
                       "trigger": {"source": "s3", "bucket": "b" * 63, "key": "k" * 200}}
    plan = database_steps.plan_fanout({"campaign": "av-drive-2026-11", "input": execution_input,
                                "execution_arn": EXECUTION,
                                "execution_name": EXECUTION.rpartition(":")[2]},
                               settings, 10)
    assert len(plan["jobs"]) == 50
    planned = execution_input | {"plan": plan}
    branch_inputs = [{"job": job, "buckets": plan["buckets"], "campaign": "av-drive-2026-11",
                      "execution_name": "n" * 80, "execution_arn": EXECUTION}
                     for job in plan["jobs"]]
    results = [database_steps.record_region_job({"job": completed(branch["job"]),
                                          "execution_arn": EXECUTION}, settings)
               for branch in branch_inputs]
    # Each region's result replaces its planned job (the Map's ResultPath is $.plan.jobs).
    after_map = planned | {"plan": plan | {"jobs": results}}
    # Each region's job billed an hour of its instances (no SageMaker in these regions here).
    monkeypatch.setattr(sagemaker, "describe_training_job", lambda region, name: {
        "BillableTimeInSeconds": 3600, "TrainingTimeInSeconds": 3600,
        "ResourceConfig": {"InstanceType": "ml.p3.16xlarge", "InstanceCount": 1}})
    outcome = database_steps.finish_fanout({"state": after_map, "execution_arn": EXECUTION},
                                           settings)
    assert outcome["status"] == "SUCCEEDED" and len(outcome["jobs"]) == 50
    selected = {k: outcome[k] for k in ("status", "error", "cause")}  # its ResultSelector
    output = {"campaign": "av-drive-2026-11", "run": "n" * 80, "status": "SUCCEEDED",
              "jobs": after_map["plan"]["jobs"]}
    sizes = {"plan": size(planned), "branch": max(size(b) for b in branch_inputs),
             "after map": size(after_map), "finish": size(after_map | {"outcome": selected}),
             "output": size(output)}
    if not options:
        assert all(value < LIMIT for value in sizes.values()), sizes
    # Within what the API keeps for the workflow's part of a state (runs/submit.py), every
    # hyperparameter at its longest too.
    times, kept = STATE_GROWTH[CAMPAIGN_FANOUT]
    assert max(sizes.values()) - times * size(execution_input) < kept, sizes
    # The run's receipt, recorded in the database, has every region's job.
    with transaction(database_steps.connection_url(settings)) as session:
        recorded = RunRepository(session).get(EXECUTION).cost
    assert len([line for line in recorded["lines"] if line["item"].startswith("SageMaker ")]) == 50

