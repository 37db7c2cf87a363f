"""A CampaignFanout's regions' use, priced from the campaign database: each region's SageMaker
job (DescribeTrainingJob's BillableTimeInSeconds × InstanceCount at the region's on-demand
price) and its staging (bytes copied × the data region's transfer price). Recorded with the
run when it finishes, so its receipt is read without calls to other regions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from sqlalchemy.orm import Session

from traingrid.costs import receipt
from traingrid.costs.prices import Price
from traingrid.db.models import Region, RegionPrice

# (region, job name) → DescribeTrainingJob's answer
DescribeTrainingJob = Callable[[str, str], dict[str, Any]]


def region_usage(session: Session, jobs: Sequence[dict[str, Any]],
                 describe: DescribeTrainingJob
                 ) -> tuple[list[receipt.SageMakerUse], list[receipt.StagingUse]]:
    """Each ended job's SageMaker use and each staged copy (``jobs``: region,
    requested_region, job_name, staged_bytes). A job SageMaker has not billed yet (still
    running) or whose instance type has no price in its region is left out."""
    sagemaker: list[receipt.SageMakerUse] = []
    staging: list[receipt.StagingUse] = []
    for job in jobs:
        if job.get("staged_bytes"):
            data_region = session.get(Region, job["requested_region"])
            if data_region is not None:
                staging.append(receipt.StagingUse(
                    f"{job['requested_region']} → {job['region']}", job["staged_bytes"],
                    Price(float(data_region.transfer_usd_per_gb), "GB",
                          "campaign database: regions.transfer_usd_per_gb of "
                          f"{job['requested_region']}")))
        if not job.get("job_name"):
            continue
        ran = describe(job["region"], job["job_name"])
        if ran.get("BillableTimeInSeconds") is None:
            continue  # not ended: SageMaker reports its billable time at the end
        config = ran["ResourceConfig"]
        price = session.get(RegionPrice, (job["region"], config["InstanceType"]))
        if price is None:
            continue
        sagemaker.append(receipt.SageMakerUse(
            job["region"], job["job_name"], config["InstanceType"], config["InstanceCount"],
            ran["BillableTimeInSeconds"],
            ran.get("TrainingTimeInSeconds") or ran["BillableTimeInSeconds"],
            Price(float(price.on_demand_usd_per_hour), "instance-hour",
                  f"campaign database: region_prices {config['InstanceType']} in "
                  f"{job['region']}, on demand")))
    return sagemaker, staging


def recorded(sagemaker: list[receipt.SageMakerUse], staging: list[receipt.StagingUse]
             ) -> dict[str, Any]:
    """The regions' use as the run's ``cost`` keeps it (beside its receipt), JSON-ready."""
    return {"sagemaker": [asdict(use) for use in sagemaker],
            "staging": [asdict(use) for use in staging]}
