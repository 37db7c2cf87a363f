"""The demo's sample campaign: driving data recorded in four regions, trained where it lies."""

from __future__ import annotations

import hashlib
from typing import Any

from traingrid.db.engine import transaction
from traingrid.db.repositories import (
    CampaignRepository,
    DatasetRepository,
    RegionRepository,
    RunRepository,
)
from traingrid_local.emulator.session import Emulator
from traingrid_local.stack.environment import Deployment

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
            min_instance_count=5, placement="data-local", expected_hours=2.0,
        )


def upload_and_mark(emulator: Emulator, deployment: Deployment) -> None:
    """Data lands in each region's campaign bucket; its _READY marker comes last. The clock
    is held: these few small uploads take seconds on AWS, not simulated minutes."""
    with emulator.paused():
        for dataset in upload_data(emulator, deployment):
            emulator.client("s3", dataset["region"]).put_object(
                Bucket=dataset["bucket"], Key=dataset["prefix"] + "_READY", Body=b"")


def upload_data(emulator: Emulator, deployment: Deployment) -> list[dict[str, Any]]:
    """The campaign's data in each region's campaign bucket (no markers): what landed where."""
    uploaded = []
    for region, stack in deployment.regional.items():
        s3 = emulator.client("s3", region)
        bucket, prefix = stack.outputs["CampaignBucketName"], f"campaigns/{CAMPAIGN}/{region}/"
        size = 0
        for index in range(SHARDS_PER_REGION):
            name = f"drive-{index:04d}.tfrecord"
            block = hashlib.sha256(f"{region}/{name}".encode()).digest()
            body = block * (SHARD_BYTES // len(block))
            s3.put_object(Bucket=bucket, Key=prefix + name, Body=body)
            size += len(body)
        uploaded.append({"region": region, "bucket": bucket, "prefix": prefix,
                         "objects": SHARDS_PER_REGION, "bytes": size})
    return uploaded


def register_without_markers(emulator: Emulator, deployment: Deployment) -> None:
    """The campaign's data uploaded and registered in the database, with no fan-out started:
    new data for scheduled retraining (``traingrid tick``) or a requested fan-out to train."""
    with emulator.paused():
        uploaded = upload_data(emulator, deployment)
    with transaction(deployment.database_url) as session:
        datasets = DatasetRepository(session)
        for dataset in uploaded:
            datasets.register(CAMPAIGN, dataset["region"],
                              f"s3://{dataset['bucket']}/{dataset['prefix']}",
                              dataset["objects"], dataset["bytes"])


def region_jobs(database_url: str, execution_arn: str) -> list[dict[str, Any]]:
    """Each region's job as the campaign database recorded it."""
    with transaction(database_url) as session:
        run = RunRepository(session).get(execution_arn)
        return [] if run is None else [
            {"region": job.region, "requested_region": job.requested_region,
             "status": job.status, "job_name": job.job_name, "job_arn": job.job_arn,
             "artifacts": job.artifacts, "failure_cause": job.failure_cause,
             "placement_reason": job.placement_reason, "attempts": job.attempts,
             "staged_bytes": job.staged_bytes}
            for job in sorted(run.jobs, key=lambda j: j.requested_region)
        ]
