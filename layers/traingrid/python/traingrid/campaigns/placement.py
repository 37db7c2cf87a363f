"""Where each region's share of a campaign trains, and why.

One SQL query (``traingrid.db.ranking``; one per instance type asked for) pairs the data of
every region holding the campaign's data with every region that could train it, prices and
ranks the pairs; this module only turns the ranked rows — data regions × candidate regions —
into plans and words.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from itertools import groupby
from typing import TYPE_CHECKING, Any

from traingrid import db
from traingrid.errors import NoCapacity, RecordNotFound, RequestInvalid
from traingrid.vocabulary.campaign_fanout import Placement, PlacementRequest, RegionJobPlan

if TYPE_CHECKING:  # its types only: ``db`` loads SQLAlchemy when the database is first used
    from sqlalchemy import Row
    from sqlalchemy.orm import Session


def plan_campaign(
    session: Session, campaign_id: str, *, placement: Placement | str | None = None,
    instance_type: str | None = None, instance_count: int | None = None,
    expected_hours: float | None = None, datasets: list[int] | None = None,
    spot: bool = False, region_instance_types: Mapping[str, str] | None = None,
) -> list[RegionJobPlan]:
    """One job per region holding the campaign's data (or only the given datasets), ordered by
    the data's region. Unset options come from the campaign; ``region_instance_types`` gives a
    data region's job its own instance type (placed and priced as such). One statement for the
    campaign's row and one ranking query per instance type, whatever the number of datasets."""
    campaign = session.get(db.Campaign, campaign_id)
    if campaign is None:
        raise RecordNotFound(f"no campaign {campaign_id!r}")
    request = PlacementRequest(
        campaign_id,
        Placement(placement or campaign.placement),
        instance_type or campaign.instance_type,
        campaign.instance_count if instance_count is None else instance_count,
        campaign.expected_hours if expected_hours is None else expected_hours,
        spot,
    )
    _validate(request)
    overridden = dict(region_instance_types or {})
    groups: list[tuple[PlacementRequest, Collection[str] | None, Collection[str]]] = [
        (request, None, tuple(overridden))]
    for instance in sorted(set(overridden.values())):
        regions = [r for r, t in overridden.items() if t == instance]
        groups.append((replace(request, instance_type=instance), regions, ()))
    plans = []
    for group_request, only, other_than in groups:
        rows = session.execute(db.region_ranking(group_request, datasets, only, other_than)).all()
        plans += [_plan(group_request, list(options))
                  for _, options in groupby(rows, key=lambda r: r.requested_region)]
    return sorted(plans, key=lambda p: p.requested_region)


def _validate(request: PlacementRequest) -> None:
    problems = []
    if request.instance_count < 1:
        problems.append({"pointer": "/instance_count", "message": "must be at least 1"})
    if request.expected_hours < 0:
        problems.append({"pointer": "/expected_hours", "message": "must not be negative"})
    if problems:
        raise RequestInvalid(problems, f"plan of campaign {request.campaign_id}")


def _plan(request: PlacementRequest, rows: Sequence[Row[Any]]) -> RegionJobPlan:
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


def _reason(request: PlacementRequest, chosen: Row[Any], rows: Sequence[Row[Any]]) -> str:
    data_region = chosen.requested_region
    home = next((row for row in rows if not row.moved), None)
    if home is None:
        return (f"{request.placement}: {_why_not_home(chosen, request)}; {chosen.region} is the "
                f"cheapest region that has, at {_usd(chosen.estimated_usd)} "
                f"({_copy(chosen)}; {request.price})")
    if chosen is not home:
        return (f"cheapest: {chosen.region} at {_usd(chosen.estimated_usd)} ({_copy(chosen)}; "
                f"{request.price}) vs {_usd(home.estimated_usd)} in {data_region}")
    if request.placement is Placement.DATA_LOCAL:
        return f"data-local: data is in {data_region} and it has headroom for {request.fleet}"
    runner_up = next((row for row in rows if row is not chosen), None)
    if runner_up is None:
        return (f"cheapest: {data_region}, where the data is, at {_usd(home.estimated_usd)} "
                f"({request.price}); it is the only region with headroom for {request.fleet}")
    return (f"cheapest: {data_region}, where the data is, at {_usd(home.estimated_usd)} "
            f"({request.price}) vs {_usd(runner_up.estimated_usd)} in {runner_up.region} "
            f"({_copy(runner_up)})")


def _why_not_home(row: Row[Any], request: PlacementRequest) -> str:
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
