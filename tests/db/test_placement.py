"""Placement: one SQL query chooses each data region's training region, its fallbacks and why."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import update
from sqlalchemy.orm import Session

from tests.db.seed import (
    CAMPAIGN,
    P3,
    PRICES,
    REGIONS,
    TB,
    add_data_everywhere,
    add_dataset,
    add_regions,
    campaign_uri,
)
from traingrid.campaigns.placement import plan_campaign
from traingrid.db.engine import engine_for
from traingrid.db.models import RegionPrice
from traingrid.db.repositories import CampaignRepository, DatasetRepository
from traingrid.errors import NoCapacity, RecordNotFound, RequestInvalid, TrainGridError
from traingrid.vocabulary.campaign_fanout import Placement, RegionJobPlan

HOURS, COUNT, GB = 8.0, 10, 1200.0  # campaign defaults; 1.2 TB of data per region


def cost(region: str, transfer_gb: float = 0.0) -> float:
    return PRICES[region] * COUNT * HOURS + 0.02 * transfer_gb


def by_data_region(plans: list[RegionJobPlan]) -> dict[str, RegionJobPlan]:
    assert [p.requested_region for p in plans] == sorted(p.requested_region for p in plans)
    return {p.requested_region: p for p in plans}


def test_data_local_trains_every_region_at_home(session):
    add_regions(session)
    add_data_everywhere(session)
    plans = by_data_region(plan_campaign(session, CAMPAIGN))
    assert list(plans) == ["eu-central-1", "eu-west-1", "us-east-1", "us-west-2"]
    for region, plan in plans.items():
        assert (plan.region, plan.copy_from, plan.transfer_gb) == (region, None, 0.0)
        assert plan.s3_uri == campaign_uri(region)
        assert (plan.objects, plan.bytes, plan.instance_type, plan.instance_count) == (
            1000, int(1.2 * TB), P3, COUNT)
        assert plan.usd_per_hour == pytest.approx(PRICES[region] * COUNT)
        assert plan.estimated_usd == pytest.approx(cost(region))
        assert plan.reason == (f"data-local: data is in {region} and it has headroom for "
                               "10 × ml.p3.16xlarge")
    # Fallbacks: every other acceptable region, cheapest first counting the copy.
    assert plans["us-east-1"].fallbacks == ("us-west-2", "eu-west-1", "eu-central-1")
    assert plans["eu-central-1"].fallbacks == ("us-east-1", "us-west-2", "eu-west-1")


def test_data_local_moves_a_region_without_headroom_to_the_cheapest_that_has(session):
    add_regions(session, capacity={"us-west-2": 0, "us-east-1": 8})
    add_data_everywhere(session)
    plans = by_data_region(plan_campaign(session, CAMPAIGN))
    moved = plans["us-west-2"]
    assert (moved.region, moved.copy_from) == ("eu-west-1", campaign_uri("us-west-2"))
    assert moved.transfer_gb == pytest.approx(GB)
    assert moved.estimated_usd == pytest.approx(cost("eu-west-1", GB))  # 2437.60 + 24.00
    assert moved.reason == (
        "data-local: us-west-2 has no capacity for 10 × ml.p3.16xlarge; eu-west-1 is the "
        "cheapest region that has, at $2,461.60 (including $24.00 to copy 1.2 TB from us-west-2; "
        "on-demand price)")
    assert moved.fallbacks == ("eu-central-1",)
    partial = plans["us-east-1"]
    assert partial.region == "eu-west-1"
    assert "us-east-1 has no capacity for 10 × ml.p3.16xlarge (headroom 8)" in partial.reason
    assert plans["eu-central-1"].region == "eu-central-1"


def test_cheapest_moves_data_when_compute_saves_more_than_the_copy_costs(session):
    add_regions(session)
    add_dataset(session, "eu-central-1")  # 1.2 TB: $24 to copy, saves $377 of compute
    add_dataset(session, "eu-west-1", size=50 * TB)  # $1,000 to copy, saves $185: stays
    plans = by_data_region(plan_campaign(session, CAMPAIGN, placement=Placement.CHEAPEST))
    moved, home = plans["eu-central-1"], plans["eu-west-1"]
    assert (moved.region, moved.copy_from) == ("us-east-1", campaign_uri("eu-central-1"))
    assert moved.estimated_usd == pytest.approx(cost("us-east-1", GB))
    assert moved.reason == ("cheapest: us-east-1 at $2,276.16 (including $24.00 to copy "
                            "1.2 TB from eu-central-1; on-demand price) vs $2,629.60 in "
                            "eu-central-1")
    assert moved.fallbacks == ("us-west-2", "eu-west-1", "eu-central-1")
    assert (home.region, home.copy_from, home.estimated_usd) == (
        "eu-west-1", None, pytest.approx(cost("eu-west-1")))
    assert home.reason == ("cheapest: eu-west-1, where the data is, at $2,437.60 (on-demand "
                           "price) vs $3,252.16 "
                           "in us-east-1 (including $1,000.00 to copy 50.0 TB from eu-west-1)")


def test_with_managed_spot_cheapest_ranks_by_the_spot_price_and_says_so(session):
    # eu-west-1 is dearer on demand than us-east-1 but cheapest on spot; us-west-2 has no
    # spot price and is ranked at its on-demand one.
    add_regions(session)
    spot = {"us-east-1": 9.0, "us-west-2": None, "eu-west-1": 4.0, "eu-central-1": 8.0}
    for code, price in spot.items():
        session.execute(update(RegionPrice).where(RegionPrice.region_code == code)
                        .values(spot_usd_per_hour=price))
    add_dataset(session, "eu-central-1")
    add_dataset(session, "us-west-2")

    on_demand = by_data_region(plan_campaign(session, CAMPAIGN, placement="cheapest"))
    plans = by_data_region(plan_campaign(session, CAMPAIGN, placement="cheapest", spot=True))

    assert on_demand["eu-central-1"].region == "us-east-1"
    moved = plans["eu-central-1"]
    assert moved.region == "eu-west-1"
    assert moved.usd_per_hour == pytest.approx(4.0 * COUNT)
    assert moved.estimated_usd == pytest.approx(4.0 * COUNT * HOURS + 0.02 * GB)
    assert moved.reason == ("cheapest: eu-west-1 at $344.00 (including $24.00 to copy 1.2 TB "
                            "from eu-central-1; spot price) vs $640.00 in eu-central-1")
    assert moved.fallbacks == ("eu-central-1", "us-east-1", "us-west-2")
    assert plans["us-west-2"].region == "eu-west-1"  # $344 on spot vs $2,252 on demand at home


def test_a_region_may_train_on_its_own_instance_type_placed_at_its_prices(session):
    add_regions(session)
    p4d = "ml.p4d.24xlarge"
    for code, price, capacity in (("eu-west-1", 40.0, 20), ("us-east-1", 37.0, 20)):
        session.add(RegionPrice(region_code=code, instance_type=p4d, on_demand_usd_per_hour=price,
                                spot_usd_per_hour=None, capacity_instances=capacity))
    add_data_everywhere(session)

    plans = by_data_region(plan_campaign(session, CAMPAIGN,
                                         region_instance_types={"eu-west-1": p4d}))

    west = plans["eu-west-1"]
    assert (west.region, west.instance_type) == ("eu-west-1", p4d)
    assert west.usd_per_hour == pytest.approx(40.0 * COUNT)
    assert west.fallbacks == ("us-east-1",)  # the only other region priced for p4d
    assert {p.instance_type for r, p in plans.items() if r != "eu-west-1"} == {P3}
    assert plans["us-east-1"].usd_per_hour == pytest.approx(PRICES["us-east-1"] * COUNT)


def test_cheapest_breaks_ties_with_the_data_region_then_the_region_code(session):
    add_regions(session, transfer={"us-west-2": 0.0}, prices={"eu-central-1": 30.47})
    add_dataset(session, "us-west-2")
    add_dataset(session, "us-east-1", size=0)
    plans = by_data_region(plan_campaign(session, CAMPAIGN, placement="cheapest"))
    # A free copy to us-east-1 costs exactly as much as staying in us-west-2.
    assert plans["us-west-2"].region == "us-west-2"
    assert plans["us-west-2"].fallbacks == ("us-east-1", "eu-central-1", "eu-west-1")
    assert plans["us-east-1"].region == "us-east-1"


def test_a_disabled_region_is_never_chosen(session):
    add_regions(session, enabled={"us-east-1": False}, capacity={"us-west-2": 0})
    add_data_everywhere(session)
    for placement in Placement:
        plans = by_data_region(plan_campaign(session, CAMPAIGN, placement=placement))
        assert all("us-east-1" not in (p.region, *p.fallbacks) for p in plans.values())
        assert plans["us-west-2"].region == "eu-west-1"
        assert plans["us-east-1"].reason.startswith(
            f"{placement}: us-east-1 is disabled; eu-west-1 is the cheapest region that has")


def test_options_override_the_campaign_and_datasets_restrict_the_plan(session):
    add_regions(session, capacity={"us-west-2": 4})
    first, *_ = add_data_everywhere(session)
    CampaignRepository(session).get(CAMPAIGN).instance_count = 30
    (only,) = plan_campaign(session, CAMPAIGN, datasets=[first.id], instance_count=4,
                            expected_hours=2.5)
    assert (only.requested_region, only.region, only.instance_count) == (
        first.region_code, first.region_code, 4)
    assert only.estimated_usd == pytest.approx(PRICES[first.region_code] * 4 * 2.5)
    assert plan_campaign(session, CAMPAIGN, datasets=[]) == []
    with pytest.raises(NoCapacity):  # the campaign's 30 fit nowhere
        plan_campaign(session, CAMPAIGN)


def test_one_job_per_region_reads_the_common_folder_of_its_datasets(session):
    add_regions(session)
    add_dataset(session, "us-west-2", suffix="2026/11/a/", objects=1, size=10)
    add_dataset(session, "us-west-2", suffix="2026/11/b/", objects=2, size=20)
    add_dataset(session, "eu-west-1", suffix="batch-1/")
    add_dataset(session, "eu-west-1", suffix="batch-2/")
    add_dataset(session, "us-east-1", suffix="x/")
    CampaignRepository(session).ensure("elsewhere")
    plans = by_data_region(plan_campaign(session, CAMPAIGN))
    assert (plans["us-west-2"].objects, plans["us-west-2"].bytes) == (3, 30)
    assert plans["us-west-2"].s3_uri == campaign_uri("us-west-2") + "2026/11/"
    assert plans["eu-west-1"].s3_uri == campaign_uri("eu-west-1")
    assert plans["us-east-1"].s3_uri == campaign_uri("us-east-1") + "x/"


def test_datasets_outside_the_campaign_folder_train_from_the_campaign_folder(session):
    add_regions(session)
    CampaignRepository(session).ensure(CAMPAIGN)
    for uri in ("s3://traingrid-campaign-eu-west-1/a/", "s3://traingrid-campaign-eu-west-1/b/"):
        DatasetRepository(session).register(CAMPAIGN, "eu-west-1", uri, 1, 1)
    (plan,) = plan_campaign(session, CAMPAIGN)
    assert plan.s3_uri == "s3://traingrid-campaign-eu-west-1/campaigns/sf-2026-11/eu-west-1/"


def test_no_acceptable_region_raises_no_capacity(session):
    add_regions(session, capacity=dict.fromkeys(REGIONS, 9))
    add_dataset(session, "us-west-2")
    with pytest.raises(NoCapacity) as raised:
        plan_campaign(session, CAMPAIGN)
    error = raised.value
    assert isinstance(error, TrainGridError)
    assert (error.region, error.instance_type, error.instance_count) == ("us-west-2", P3, 10)
    assert "us-west-2 has no capacity for 10 × ml.p3.16xlarge (headroom 9)" in error.message
    with pytest.raises(NoCapacity, match="us-west-2 has no price for ml.p5.48xlarge"):
        plan_campaign(session, CAMPAIGN, instance_type="ml.p5.48xlarge")


def test_bad_requests_are_refused(session):
    add_regions(session)
    add_dataset(session, "us-west-2")
    with pytest.raises(RecordNotFound):
        plan_campaign(session, "no-such-campaign")
    with pytest.raises(RequestInvalid, match="/instance_count: must be at least 1"):
        plan_campaign(session, CAMPAIGN, instance_count=0)
    with pytest.raises(ValueError, match="'nearest'"):
        plan_campaign(session, CAMPAIGN, placement="nearest")


def test_plans_are_json_ready(session):
    add_regions(session, capacity={"eu-west-1": 0})
    add_data_everywhere(session)
    plan = by_data_region(plan_campaign(session, CAMPAIGN))["eu-west-1"]
    assert json.loads(json.dumps(plan.as_dict())) == {
        "region": "us-east-1", "requested_region": "eu-west-1",
        "s3_uri": campaign_uri("eu-west-1"), "objects": 1000, "bytes": int(1.2 * TB),
        "instance_type": P3, "instance_count": 10, "usd_per_hour": 281.52,
        "transfer_gb": 1200.0, "estimated_usd": 2276.16, "reason": plan.reason,
        "fallbacks": ["us-west-2", "eu-central-1"], "copy_from": campaign_uri("eu-west-1"),
    }


def test_planning_takes_the_same_statements_for_3_or_300_datasets(session, statements):
    add_regions(session, capacity={"us-west-2": 0})
    for region in REGIONS[:3]:
        add_dataset(session, region)
    session.commit()

    def statements_to_plan() -> int:
        session.expire_all()
        before = statements()
        plan_campaign(session, CAMPAIGN)
        return statements() - before

    few = statements_to_plan()
    for n in range(297):
        add_dataset(session, REGIONS[n % 4], suffix=f"part-{n:03d}/", size=10**9)
    session.commit()
    many = statements_to_plan()
    assert few == many == 2  # the campaign's row and the ranking


# Any prices, headroom, switches and sizes: the choice is the rule's, the fallbacks are the rest.
region_settings = st.fixed_dictionaries({
    code: st.tuples(st.sampled_from([20.0, 28.152, 30.47, 32.87]), st.sampled_from([0, 9, 10, 40]),
                    st.booleans(), st.sampled_from([0.0, 0.02, 0.09]),
                    st.sampled_from([0, 10**9, 10**12, 50 * 10**12]))
    for code in REGIONS
})


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(world=region_settings, placement=st.sampled_from(list(Placement)))
def test_choice_and_fallbacks_follow_the_rule(migrated_url, world, placement):
    # Nothing is committed: each example starts from the empty database.
    with Session(engine_for(migrated_url)) as session:
        add_regions(session, prices={c: w[0] for c, w in world.items()},
                    capacity={c: w[1] for c, w in world.items()},
                    enabled={c: w[2] for c, w in world.items()},
                    transfer={c: w[3] for c, w in world.items()})
        for code, settings_ in world.items():
            add_dataset(session, code, size=settings_[4])
        acceptable = {c for c, w in world.items() if w[2] and w[1] >= COUNT}

        def estimate(data: str, region: str) -> float:
            moved = 0.0 if region == data else world[data][4] / 1e9 * world[data][3]
            return world[region][0] * COUNT * HOURS + moved

        if not acceptable:
            with pytest.raises(NoCapacity):
                plan_campaign(session, CAMPAIGN, placement=placement)
            return
        for plan in plan_campaign(session, CAMPAIGN, placement=placement):
            data = plan.requested_region
            cheapest = min(estimate(data, r) for r in acceptable)
            if placement is Placement.DATA_LOCAL and data in acceptable:
                assert plan.region == data
            else:
                assert estimate(data, plan.region) == pytest.approx(cheapest)
            assert set(plan.fallbacks) == acceptable - {plan.region}
            costs = [estimate(data, r) for r in plan.fallbacks]
            assert costs == sorted(costs)
            assert plan.estimated_usd == pytest.approx(estimate(data, plan.region))
            assert (plan.copy_from is None) == (plan.region == data)
