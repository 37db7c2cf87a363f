"""The demo's sample campaign: driving data recorded in four regions, trained where it lies."""

from __future__ import annotations

import hashlib
from typing import Any

from traingrid.db.engine import transaction
from traingrid.db.repositories import CampaignRepository, RegionRepository, RunRepository
from traingrid_local.emulator.session import Emulator
from traingrid_local.environment import Deployment

CAMPAIGN = "av-drive-2026-11"
INSTANCE_TYPE = "ml.p3.16xlarge"
# On-demand and spot USD per instance-hour, capacity headroom in instances.
REGION_PRICES = {
    "us-east-1": (28.152, 8.446, 40),
    "us-west-2": (28.152, 8.446, 40),
    "eu-west-1": (30.478, 9.143, 30),
    "eu-central-1": (32.872, 9.862, 30),
}
TRANSFER_USD_PER_GB = 0.02
HYPERPARAMETERS = {"num_epochs": 90, "batch_size": 256, "lr_decay_mode": "poly",
                   "warmup_epochs": 10}
SHARDS_PER_REGION = 3
SHARD_BYTES = 32 * 1024


def seed(deployment: Deployment) -> None:
    """The regions TrainGrid may train in, and the campaign (4 × 10 × ml.p3.16xlarge)."""
    with transaction(deployment.database_url) as session:
        regions = RegionRepository(session)
        for code, (on_demand, spot, capacity) in REGION_PRICES.items():
            regions.upsert(
                code, enabled=True, transfer_usd_per_gb=TRANSFER_USD_PER_GB,
                artifact_bucket=deployment.regional[code].outputs["ArtifactBucketName"],
                prices={INSTANCE_TYPE: {"on_demand_usd_per_hour": on_demand,
                                        "spot_usd_per_hour": spot,
                                        "capacity_instances": capacity}},
            )
        CampaignRepository(session).ensure(
            CAMPAIGN, description="Driving campaign: San Francisco, Virginia, Dublin, Stuttgart",
            hyperparameters=HYPERPARAMETERS, instance_type=INSTANCE_TYPE, instance_count=10,
            placement="data-local", expected_hours=2.0,
        )


def upload_and_mark(emulator: Emulator, deployment: Deployment) -> None:
    """Data lands in each region's campaign bucket; its _READY marker comes last. The clock
    is held: these few small uploads take seconds on AWS, not simulated minutes."""
    with emulator.paused():
        _upload_and_mark(emulator, deployment)


def _upload_and_mark(emulator: Emulator, deployment: Deployment) -> None:
    for region, stack in deployment.regional.items():
        s3 = emulator.client("s3", region)
        bucket, prefix = stack.outputs["CampaignBucketName"], f"campaigns/{CAMPAIGN}/{region}/"
        for index in range(SHARDS_PER_REGION):
            name = f"drive-{index:04d}.tfrecord"
            block = hashlib.sha256(f"{region}/{name}".encode()).digest()
            s3.put_object(Bucket=bucket, Key=prefix + name,
                          Body=block * (SHARD_BYTES // len(block)))
        s3.put_object(Bucket=bucket, Key=prefix + "_READY", Body=b"")


def region_jobs(database_url: str, execution_arn: str) -> list[dict[str, Any]]:
    """Each region's job as the campaign database recorded it."""
    with transaction(database_url) as session:
        run = RunRepository(session).get(execution_arn)
        return [] if run is None else [
            {"region": job.region, "requested_region": job.requested_region,
             "status": job.status, "job_name": job.job_name, "job_arn": job.job_arn,
             "artifacts": job.artifacts, "failure_cause": job.failure_cause,
             "placement_reason": job.placement_reason, "attempts": job.attempts}
            for job in sorted(run.jobs, key=lambda j: j.requested_region)
        ]
