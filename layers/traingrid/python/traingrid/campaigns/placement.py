"""Where each region's share of a campaign trains, and why: one SQL query ranks the regions.

For every region that holds data of the campaign, the query pairs that data with every region
that could train it (enabled, priced for the instance type, with headroom for the whole fleet),
prices each pair (compute for the expected hours plus copying the data out of its region), and
ranks the pairs twice: by the placement policy (the choice) and by cost (the fallbacks).
Python only turns the ranked rows — data regions × candidate regions — into plans and words.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from itertools import groupby
from typing import Any

from sqlalchemy import Float, Row, Select, and_, case, cast, func, select, true
from sqlalchemy.orm import Session, aliased

from traingrid.db.models import Campaign, Dataset, Region, RegionPrice
from traingrid.db.repositories import RecordNotFound
from traingrid.errors import RequestInvalid, TrainGridError

BYTES_PER_GB = 1e9  # transfer is priced per decimal GB


class Placement(StrEnum):
    DATA_LOCAL = "data-local"  # train where the data is; move only when it has no headroom
    CHEAPEST = "cheapest"  # train where compute plus copying the data costs least


class NoCapacity(TrainGridError):
    """No region can take the job: none enabled, priced and with headroom for the fleet."""

    def __init__(self, region: str, instance_type: str, instance_count: int, why: str) -> None:
        self.region, self.instance_type, self.instance_count = region, instance_type, instance_count
        super().__init__(
            f"No region can train the {region} data on {instance_count} × {instance_type}: "
            f"{why}, and no other enabled region with a price for {instance_type} has headroom "
            f"for {instance_count}. Raise the quota or wait for capacity, or plan with fewer "
            "instances or another instance type."
        )


@dataclass(frozen=True)
class RegionJobPlan:
    region: str  # where it trains
    requested_region: str  # where the data is
    s3_uri: str  # the data's prefix in requested_region
    objects: int
    bytes: int
    instance_type: str
    instance_count: int
    usd_per_hour: float  # on-demand price × count in `region`
    transfer_gb: float  # 0 when region == requested_region
    estimated_usd: float  # usd_per_hour × expected_hours + transfer cost
    reason: str  # why this region, in words
    fallbacks: tuple[str, ...]  # other acceptable regions, cheapest first
    copy_from: str | None  # the source prefix when the data must be copied, else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fallbacks": list(self.fallbacks)}


@dataclass(frozen=True)
class _Request:
    campaign_id: str
    placement: Placement
    instance_type: str
    instance_count: int
    expected_hours: float

    @property
    def fleet(self) -> str:
        return f"{self.instance_count} × {self.instance_type}"


def plan_campaign(
    session: Session, campaign_id: str, *, placement: Placement | str | None = None,
    instance_type: str | None = None, instance_count: int | None = None,
    expected_hours: float | None = None, datasets: list[int] | None = None,
) -> list[RegionJobPlan]:
    """One job per region holding the campaign's data (or only the given datasets), ordered by
    the data's region. Unset options come from the campaign. At most two statements, whatever
    the number of datasets: the campaign's row and the ranking query."""
    campaign = session.get(Campaign, campaign_id)
    if campaign is None:
        raise RecordNotFound(f"no campaign {campaign_id!r}")
    request = _Request(
        campaign_id,
        Placement(placement or campaign.placement),
        instance_type or campaign.instance_type,
        campaign.instance_count if instance_count is None else instance_count,
        campaign.expected_hours if expected_hours is None else expected_hours,
    )
    _validate(request)
    rows = session.execute(_ranking(request, datasets)).all()
    return [_plan(request, list(options))
            for _, options in groupby(rows, key=lambda r: r.requested_region)]


def _validate(request: _Request) -> None:
    problems = []
    if request.instance_count < 1:
        problems.append({"pointer": "/instance_count", "message": "must be at least 1"})
    if request.expected_hours < 0:
        problems.append({"pointer": "/expected_hours", "message": "must not be negative"})
    if problems:
        raise RequestInvalid(problems, f"plan of campaign {request.campaign_id}")


def _ranking(request: _Request, dataset_ids: list[int] | None) -> Select[Any]:
    """Every (data region, acceptable region) pair with its cost and both ranks; a data region
    with no acceptable region still yields one row, with ``region`` NULL."""
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
    data_cte = data.cte("data")
    # Regions that could take the whole fleet now.
    acceptable = (
        select(Region.code.label("region"),
               cast(RegionPrice.on_demand_usd_per_hour, Float).label("usd_per_instance_hour"))
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


def _plan(request: _Request, rows: Sequence[Row[Any]]) -> RegionJobPlan:
    """The plan of one data region from its rows (one per acceptable region, cheapest first)."""
    data = rows[0]
    if data.region is None:
        raise NoCapacity(data.requested_region, request.instance_type, request.instance_count,
                         _why_not_home(data, request))
    chosen = next(row for row in rows if row.choice_rank == 1)
    s3_uri = _prefix(request.campaign_id, data)
    moved = chosen.region != data.requested_region
    return RegionJobPlan(
        region=chosen.region,
        requested_region=data.requested_region,
        s3_uri=s3_uri,
        objects=int(data.objects),
        bytes=int(data.bytes),
        instance_type=request.instance_type,
        instance_count=request.instance_count,
        usd_per_hour=round(chosen.usd_per_hour, 4),
        transfer_gb=round(chosen.transfer_gb, 6),
        estimated_usd=round(chosen.estimated_usd, 4),
        reason=_reason(request, chosen, rows),
        fallbacks=tuple(row.region for row in rows if row is not chosen),
        copy_from=s3_uri if moved else None,
    )


def _prefix(campaign_id: str, data: Row[Any]) -> str:
    """The one prefix a region's job reads: the deepest folder holding all its datasets.

    The longest common prefix of a set of strings is the common prefix of its first and last
    in sort order, so the query's MIN and MAX are enough. That folder is used only inside the
    campaign's folder for the region (``s3://<bucket>/campaigns/<campaign>/<region>/``, in the
    bucket of the first dataset); datasets with nothing deeper in common train from that
    folder, so a job never reads another campaign's data.
    """
    first, last = data.first_uri, data.last_uri
    if first == last:
        return first
    bucket = first.removeprefix("s3://").partition("/")[0]
    campaign_folder = f"s3://{bucket}/campaigns/{campaign_id}/{data.requested_region}/"
    common = posixpath.commonprefix([first, last])
    common_folder = common[: common.rfind("/") + 1]
    return common_folder if common_folder.startswith(campaign_folder) else campaign_folder


def _reason(request: _Request, chosen: Row[Any], rows: Sequence[Row[Any]]) -> str:
    data_region = chosen.requested_region
    home = next((row for row in rows if not row.moved), None)
    if home is None:
        return (f"{request.placement}: {_why_not_home(chosen, request)}; {chosen.region} is the "
                f"cheapest region that has, at {_usd(chosen.estimated_usd)} "
                f"({_copy(chosen)})")
    if chosen is not home:
        return (f"cheapest: {chosen.region} at {_usd(chosen.estimated_usd)} ({_copy(chosen)}) "
                f"vs {_usd(home.estimated_usd)} in {data_region}")
    if request.placement is Placement.DATA_LOCAL:
        return f"data-local: data is in {data_region} and it has headroom for {request.fleet}"
    runner_up = next((row for row in rows if row is not chosen), None)
    if runner_up is None:
        return (f"cheapest: {data_region}, where the data is, at {_usd(home.estimated_usd)}; "
                f"it is the only region with headroom for {request.fleet}")
    return (f"cheapest: {data_region}, where the data is, at {_usd(home.estimated_usd)} vs "
            f"{_usd(runner_up.estimated_usd)} in {runner_up.region} ({_copy(runner_up)})")


def _why_not_home(row: Row[Any], request: _Request) -> str:
    region = row.requested_region
    if not row.home_enabled:
        return f"{region} is disabled"
    if row.home_price is None:
        return f"{region} has no price for {request.instance_type}"
    headroom = f" (headroom {row.home_capacity})" if row.home_capacity else ""
    return f"{region} has no capacity for {request.fleet}{headroom}"


def _copy(row: Row[Any]) -> str:
    return (f"including {_usd(row.transfer_usd)} to copy {_size(row.transfer_gb)} "
            f"from {row.requested_region}")


def _usd(amount: float) -> str:
    return f"${amount:,.2f}"


def _size(gb: float) -> str:
    if gb >= 1000:
        return f"{gb / 1000:.1f} TB"
    return f"{gb:.1f} GB" if gb >= 1 else f"{gb * 1000:.1f} MB"
