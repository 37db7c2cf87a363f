"""The query that ranks, for every region holding a campaign's data, the regions that could
train it: enabled, priced for the instance type and with headroom for the whole fleet.

Each (data region, acceptable region) pair is priced (compute for the expected hours, at the
spot price under managed spot and on-demand otherwise, plus copying the data out of its
region) and ranked twice: by the placement policy (the choice) and by cost (the fallbacks).
``traingrid.campaigns.placement`` turns the rows into plans and words.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Float, Select, and_, case, cast, func, select, true
from sqlalchemy.orm import aliased

from traingrid.db.models import Dataset, Region, RegionPrice
from traingrid.vocabulary.campaign_fanout import Placement, PlacementRequest

BYTES_PER_GB = 1e9  # transfer is priced per decimal GB


def ranking(request: PlacementRequest, dataset_ids: list[int] | None,
            data_regions: Collection[str] | None = None,
            other_than: Collection[str] = ()) -> Select[Any]:
    """Every (data region, acceptable region) pair with its cost and both ranks; a data region
    with no acceptable region still yields one row, with ``region`` NULL. ``data_regions``
    (only these) and ``other_than`` (not these) limit the data regions planned."""
    count, hours = request.instance_count, request.expected_hours
    # The campaign's data, per region.
    data = (
        select(
            Dataset.region_code.label("requested_region"),
            func.sum(Dataset.objects).label("objects"),
            func.sum(Dataset.bytes).label("bytes"),
            func.min(Dataset.s3_uri).label("first_uri"),
            func.max(Dataset.s3_uri).label("last_uri"),
        )
        .where(Dataset.campaign_id == request.campaign_id)
        .group_by(Dataset.region_code)
    )
    if dataset_ids is not None:
        data = data.where(Dataset.id.in_(dataset_ids))
    if data_regions is not None:
        data = data.where(Dataset.region_code.in_(list(data_regions)))
    if other_than:
        data = data.where(Dataset.region_code.not_in(list(other_than)))
    data_cte = data.cte("data")
    # Regions that could take the whole fleet now, at the price the job pays.
    price = (func.coalesce(RegionPrice.spot_usd_per_hour, RegionPrice.on_demand_usd_per_hour)
             if request.spot else RegionPrice.on_demand_usd_per_hour)
    acceptable = (
        select(Region.code.label("region"),
               cast(price, Float).label("usd_per_instance_hour"))
        .join(RegionPrice, RegionPrice.region_code == Region.code)
        .where(Region.enabled.is_(True), RegionPrice.instance_type == request.instance_type,
               RegionPrice.capacity_instances >= count)
        .cte("acceptable")
    )
    # The data's own region (the source of any copy) and its price row, if any: why it was
    # not acceptable, when it was not.
    source = aliased(Region, name="source")
    home = aliased(RegionPrice, name="home")
    at_home = acceptable.c.region == data_cte.c.requested_region
    transfer_gb = case((at_home, 0.0), else_=cast(data_cte.c.bytes, Float) / BYTES_PER_GB)
    usd_per_hour = acceptable.c.usd_per_instance_hour * count
    transfer_usd = transfer_gb * cast(source.transfer_usd_per_gb, Float)
    options = (
        select(
            data_cte,
            source.enabled.label("home_enabled"),
            home.on_demand_usd_per_hour.label("home_price"),
            home.capacity_instances.label("home_capacity"),
            acceptable.c.region,
            case((at_home, 0), else_=1).label("moved"),
            usd_per_hour.label("usd_per_hour"),
            transfer_gb.label("transfer_gb"),
            transfer_usd.label("transfer_usd"),
            (usd_per_hour * hours + transfer_usd).label("estimated_usd"),
        )
        .join(source, source.code == data_cte.c.requested_region)
        .outerjoin(home, and_(home.region_code == data_cte.c.requested_region,
                              home.instance_type == request.instance_type))
        .outerjoin(acceptable, true())
        .cte("options")
    )
    # Ties in cost go to the data's region, then to the first region code.
    by_cost = (options.c.estimated_usd, options.c.moved, options.c.region)
    if request.placement is Placement.DATA_LOCAL:  # at home when acceptable, else the cheapest
        by_choice = (options.c.moved, options.c.estimated_usd, options.c.region)
    else:
        by_choice = by_cost
    by_data_region = options.c.requested_region
    cost_rank = func.row_number().over(partition_by=by_data_region, order_by=by_cost)
    return select(
        options,
        func.row_number().over(partition_by=by_data_region, order_by=by_choice)
        .label("choice_rank"),
        cost_rank.label("cost_rank"),
    ).order_by(by_data_region, "cost_rank")
