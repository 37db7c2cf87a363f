"""A CampaignFanout's regions' use, priced from the campaign database: each region's SageMaker
job (DescribeTrainingJob's BillableTimeInSeconds × InstanceCount at the region's on-demand
price) and its staging (bytes copied × the data region's transfer price). Recorded with the
run when it finishes, so its receipt is read without calls to other regions.

One place decides what a job that cannot be described costs: nothing, with a word on the
receipt saying why (it never started, SageMaker has no record of it, or it could not be read).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from traingrid import db
from traingrid.aws import sagemaker
from traingrid.costs import receipt
from traingrid.costs.prices import Price
from traingrid.errors import AwsServiceError, ResourceNotFound, TrainGridError
from traingrid.observability import logger

if TYPE_CHECKING:  # its type only: ``db`` loads SQLAlchemy when it is first used
    from sqlalchemy.orm import Session

# (region, job name) → DescribeTrainingJob's answer; raises TrainGridError.
DescribeTrainingJob = Callable[[str, str], dict[str, Any]]
# A job as SageMaker reported it, or why it is left off the receipt.
Described = Mapping[tuple[str, str], "dict[str, Any] | receipt.UnpricedJob"]


def _never_ran(error: TrainGridError) -> bool:
    """SageMaker has no such job: its model says ResourceNotFound, the service (and the
    emulator) answer ValidationException 'Requested resource not found' / 'Could not find'."""
    if isinstance(error, ResourceNotFound):
        return True
    return isinstance(error, AwsServiceError) and error.code == "ValidationException" and (
        "not found" in error.message.lower() or "could not find" in error.message.lower())


def describe_jobs(jobs: Sequence[dict[str, Any]],
                  describe: DescribeTrainingJob | None = None) -> Described:
    """Each named job (``jobs``: region, job_name, job_arn) as SageMaker reports it, or why
    it cannot be priced; one call per job, in its own region (through the adapter unless
    ``describe`` is given)."""
    describe = describe or sagemaker.describe_training_job
    found: dict[tuple[str, str], dict[str, Any] | receipt.UnpricedJob] = {}
    for job in jobs:
        if not job.get("job_name"):
            continue
        region, name = job["region"], job["job_name"]
        try:
            found[(region, name)] = describe(region, name)
        except TrainGridError as error:  # refused, or the region unreachable
            if _never_ran(error):
                reason = ("not priced: it never started (SageMaker has no such job)"
                          if not job.get("job_arn") else
                          "not priced: SageMaker no longer describes it")
            else:
                reason = f"not priced: DescribeTrainingJob failed ({error})"
                logger.warning("training job not priced: cannot describe it",
                               extra={"region": region, "job_name": name, "error": str(error)})
            found[(region, name)] = receipt.UnpricedJob(region, name, reason)
    return found


def region_usage(session: Session, jobs: Sequence[dict[str, Any]],
                 described: Described) -> receipt.RegionsUsed:
    """Each ended job's SageMaker use, each staged copy (``jobs``: region, requested_region,
    job_name, staged_bytes) and each job left unpriced, with why. A job SageMaker has not
    billed yet (still running) or whose instance type has no price in its region is left
    out."""
    used = receipt.RegionsUsed()
    for job in jobs:
        if job.get("staged_bytes"):
            data_region = session.get(db.Region, job["requested_region"])
            if data_region is not None:
                used.staging.append(receipt.StagingUse(
                    f"{job['requested_region']} → {job['region']}", job["staged_bytes"],
                    Price(float(data_region.transfer_usd_per_gb), "GB",
                          "campaign database: regions.transfer_usd_per_gb of "
                          f"{job['requested_region']}")))
        if not job.get("job_name"):
            continue
        ran = described.get((job["region"], job["job_name"]))
        if ran is None:
            continue
        if isinstance(ran, receipt.UnpricedJob):
            used.unpriced.append(ran)
            continue
        if ran.get("BillableTimeInSeconds") is None:
            continue  # not ended: SageMaker reports its billable time at the end
        config = ran["ResourceConfig"]
        price = session.get(db.RegionPrice, (job["region"], config["InstanceType"]))
        if price is None:
            continue
        used.sagemaker.append(receipt.SageMakerUse(
            job["region"], job["job_name"], config["InstanceType"], config["InstanceCount"],
            ran["BillableTimeInSeconds"],
            ran.get("TrainingTimeInSeconds") or ran["BillableTimeInSeconds"],
            Price(float(price.on_demand_usd_per_hour), "instance-hour",
                  f"campaign database: region_prices {config['InstanceType']} in "
                  f"{job['region']}, on demand")))
    return used


def recorded(used: receipt.RegionsUsed) -> dict[str, Any]:
    """The regions' use as the run's ``cost`` keeps it (beside its receipt), JSON-ready."""
    return {"sagemaker": [asdict(use) for use in used.sagemaker],
            "staging": [asdict(use) for use in used.staging],
            "unpriced": [asdict(job) for job in used.unpriced]}
