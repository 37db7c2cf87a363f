"""``make bench``'s ``scale.fanout``: a CampaignFanout of 20 regions whose jobs train 5
(simulated) days, on the emulator, and the largest history any of its executions has.

Step Functions ends an execution at 25,000 history events. Each region's branch is an
execution of its own (CampaignRegion, started with ``startExecution.sync:2``), woken by
SageMaker's event when its job ends and checked every ``branch.EVENT_FALLBACK_S`` without
one; the fan-out's own history holds each branch's start and end. The goal is 2,000 events
for any execution, far under the limit. ``python -m traingrid_local.bench_scale_fanout``
runs it alone.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

REGIONS = ("us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1",
           "eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1", "eu-south-1",
           "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-southeast-1",
           "ap-southeast-2", "ap-south-1", "me-south-1", "af-south-1")
DAYS = 5
GOAL_MAX_HISTORY_EVENTS = 2000
SPEED = 20_000.0


def seed_wide(deployment: Any) -> None:
    """Every deployed region may train, at one price; the sample campaign's options."""
    from traingrid.db.engine import transaction
    from traingrid.db.repositories import CampaignRepository, RegionRepository
    from traingrid_local.stack import sample_campaign as sample

    with transaction(deployment.database_url) as session:
        regions = RegionRepository(session)
        for code, stack in deployment.regional.items():
            regions.upsert(code, enabled=True, transfer_usd_per_gb=sample.TRANSFER_USD_PER_GB,
                           artifact_bucket=stack.outputs["ArtifactBucketName"],
                           prices={sample.INSTANCE_TYPE: {"on_demand_usd_per_hour": 28.152,
                                                          "spot_usd_per_hour": 8.446,
                                                          "capacity_instances": 40}})
        CampaignRepository(session).ensure(
            sample.CAMPAIGN, description="A campaign recorded in every region",
            hyperparameters=sample.HYPERPARAMETERS, instance_type=sample.INSTANCE_TYPE,
            instance_count=10, min_instance_count=5, placement="data-local",
            expected_hours=DAYS * 24.0)


def histories(emulator: Any, deployment: Any) -> dict[str, int]:
    """Every execution of both fan-out state machines, by ARN: its number of history events."""
    from traingrid_local.stack import report

    sfn = emulator.client("stepfunctions")
    counts = {}
    for output in ("CampaignFanoutStateMachineArn", "CampaignRegionStateMachineArn"):
        for page in sfn.get_paginator("list_executions").paginate(
                stateMachineArn=deployment.stack.outputs[output]):
            for execution in page["executions"]:
                arn = execution["executionArn"]
                counts[arn] = len(report.history(emulator, arn))
    return counts


def run_wide_fanout(emulator: Any, deployment: Any, name: str = "wide-fanout",
                    timeout_s: float = 600) -> dict[str, Any]:
    """Register the campaign's data in every deployed region, run one fan-out to its end (the
    clock skipping whatever time every thread waits); its description."""
    from traingrid_local.demo.runner import wait_for_runs
    from traingrid_local.stack import sample_campaign

    seed_wide(deployment)
    sample_campaign.register_without_markers(emulator, deployment)
    sfn = emulator.client("stepfunctions")
    arn = sfn.start_execution(
        stateMachineArn=deployment.stack.outputs["CampaignFanoutStateMachineArn"], name=name,
        input=json.dumps({"campaign": sample_campaign.CAMPAIGN, "settle_s": 0}),
    )["executionArn"]
    wait_for_runs(emulator, [deployment.stack.outputs["CampaignFanoutStateMachineArn"]],
                  timeout_s, None, fast_forward=True)
    return sfn.describe_execution(executionArn=arn)


def measure(regions: tuple[str, ...] = REGIONS, days: int = DAYS) -> dict[str, Any]:
    from traingrid_local.emulator.session import Emulator
    from traingrid_local.stack.environment import deploy_traingrid

    started = time.perf_counter()
    with Emulator(speed=SPEED, training_seconds={"sagemaker": days * 86400}) as emulator:
        deployment = deploy_traingrid(emulator, regions=regions)
        try:
            execution = run_wide_fanout(emulator, deployment)
            counts = histories(emulator, deployment)
            jobs = json.loads(execution.get("output") or "{}").get("jobs", [])
        finally:
            deployment.close()
    return {"regions": len(regions), "days": days, "status": execution["status"],
            "completed_regions": sum(j.get("status") == "Completed" for j in jobs),
            "max_history_events": max(counts.values()), "executions": len(counts),
            "fanout_history_events": counts[execution["executionArn"]],
            "wall_s": round(time.perf_counter() - started, 1)}


def measure_into(results: dict[str, Any]) -> None:
    """``make bench``'s hook: ``results["scale"]["fanout"]``."""
    results.setdefault("scale", {})["fanout"] = measure()


def goals(results: dict[str, Any]) -> dict[str, Any]:
    events = results.get("scale", {}).get("fanout", {}).get("max_history_events")
    if events is None:
        return {}
    return {"largest history of a 20-region, 5-day fan-out": {
        "value": events, "at_most": GOAL_MAX_HISTORY_EVENTS, "unit": "events",
        "met": events <= GOAL_MAX_HISTORY_EVENTS}}


def row(figure: dict[str, Any]) -> tuple[str, str]:
    return (f"fan-out {figure['regions']} regions × {figure['days']} days",
            f"{figure['status']}, {figure['completed_regions']} completed; largest history "
            f"{figure['max_history_events']:,} events of {figure['executions']} executions "
            f"(the fan-out's own {figure['fanout_history_events']}); {figure['wall_s']} s wall")


def add_row(table: Any, results: dict[str, Any]) -> None:
    """``make bench``'s table: the row, when the figure was measured."""
    if found := results.get("scale", {}).get("fanout"):
        table.add_row(*row(found))


if __name__ == "__main__":
    measured: dict[str, Any] = {}
    measure_into(measured)
    print(json.dumps(measured["scale"]["fanout"], indent=2))
    print(": ".join(row(measured["scale"]["fanout"])))
    sys.exit(0 if all(g["met"] for g in goals(measured).values()) else 1)
