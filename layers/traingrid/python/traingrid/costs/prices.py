"""The price table a run's cost receipt is computed with: one file to update when AWS's prices
change (bump ``VERSION``; every receipt names the version it used).

Every figure is USD, us-east-1 list price, with where it came from. Instance and FSx prices
live in ``vocabulary.catalog`` (the plan's estimate uses the same ones); a campaign's SageMaker
prices are the campaign database's ``region_prices``, not this table.
"""

from __future__ import annotations

from dataclasses import dataclass

from traingrid.vocabulary.catalog import FSX_TIERS, HOURS_PER_MONTH, INSTANCE_TYPES

VERSION = "2026-11-25"
CURRENCY = "USD"


@dataclass(frozen=True)
class Price:
    usd: float
    unit: str
    source: str


CATALOG = "vocabulary.catalog (aws.amazon.com/ec2/pricing/on-demand, us-east-1)"
FSX_SOURCE = "vocabulary.catalog.FSX_TIERS (aws.amazon.com/fsx/lustre/pricing, us-east-1)"

STATE_TRANSITION = Price(0.025 / 1000, "state transition",
                         "aws.amazon.com/step-functions/pricing: Standard, $0.025 per 1,000")
# Lambda bills $0.20 per million requests and $0.0000166667 per GB-second (x86). TrainGrid's
# step functions run well under a second at 512 MB-1 GB: stated as 1 GB-second each.
LAMBDA_INVOCATION = Price(0.0000002 + 0.0000166667, "invocation",
                          "aws.amazon.com/lambda/pricing: $0.20/1M requests + 1 GB-s at "
                          "$0.0000166667 (stated estimate per invocation)")
# Used when the campaign database gives no region's transfer price.
INTER_REGION_TRANSFER = Price(0.02, "GB", "aws.amazon.com/ec2/pricing/on-demand: data "
                                          "transfer between regions, $0.02/GB")


def instance_hour(instance_type: str) -> Price | None:
    found = INSTANCE_TYPES.get(instance_type)
    if found is None:
        return None
    return Price(found.usd_per_hour, "node-hour", f"{CATALOG}: {instance_type}")


def file_system_gb_hour(deployment_type: str, per_unit_mb_s: int | None) -> Price | None:
    """A deployment type's storage price per GB-hour (a persistent type's at its throughput
    per TiB)."""
    for tier in FSX_TIERS:
        if tier.deployment_type == deployment_type and (
                not tier.per_unit or tier.mb_s_per_tib == per_unit_mb_s):
            per_unit = f" at {per_unit_mb_s} MB/s/TiB" if tier.per_unit else ""
            return Price(tier.usd_per_gb_month / HOURS_PER_MONTH, "GB-hour",
                         f"{FSX_SOURCE}: {deployment_type}{per_unit} "
                         f"${tier.usd_per_gb_month}/GB-month ÷ {HOURS_PER_MONTH} h")
    return None
