"""Realistic campaign data for the tests: four regions priced like ml.p3.16xlarge on demand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from traingrid.db.models import Dataset
from traingrid.db.repositories import CampaignRepository, DatasetRepository, RegionRepository

CAMPAIGN = "sf-2026-11"
P3 = "ml.p3.16xlarge"
# On-demand USD per instance-hour.
PRICES = {"us-east-1": 28.152, "us-west-2": 28.152, "eu-west-1": 30.47, "eu-central-1": 32.87}
REGIONS = tuple(PRICES)
TRANSFER_USD_PER_GB = 0.02
T0 = datetime(2026, 11, 1, 6, 0, tzinfo=UTC)
TB = 10**12


def add_regions(
    session: Session, *, capacity: dict[str, int] | None = None,
    enabled: dict[str, bool] | None = None, prices: dict[str, float] | None = None,
    transfer: dict[str, float] | None = None,
) -> None:
    """The four regions; each has headroom for 20 instances unless ``capacity`` says otherwise."""
    capacity, enabled, transfer = capacity or {}, enabled or {}, transfer or {}
    for code, price in (PRICES | (prices or {})).items():
        RegionRepository(session).upsert(
            code, enabled=enabled.get(code, True),
            transfer_usd_per_gb=transfer.get(code, TRANSFER_USD_PER_GB),
            artifact_bucket=f"traingrid-artifacts-{code}",
            prices={P3: {"on_demand_usd_per_hour": price,
                         "spot_usd_per_hour": round(price * 0.3, 4),
                         "capacity_instances": capacity.get(code, 20)}},
        )


def campaign_uri(region: str, campaign: str = CAMPAIGN) -> str:
    return f"s3://traingrid-campaign-{region}/campaigns/{campaign}/{region}/"


def add_dataset(
    session: Session, region: str, *, campaign: str = CAMPAIGN, size: int = int(1.2 * TB),
    objects: int = 1000, at: datetime = T0, suffix: str = "",
) -> Dataset:
    CampaignRepository(session).ensure(campaign)
    dataset, _ = DatasetRepository(session).register(
        campaign, region, campaign_uri(region, campaign) + suffix, objects, size,
        f'"etag-{region}-{suffix}"', at,
    )
    return dataset


def add_data_everywhere(session: Session, **kwargs) -> list[Dataset]:
    return [add_dataset(session, region, **kwargs) for region in REGIONS]


def hours(n: float) -> timedelta:
    return timedelta(hours=n)
