"""A running CampaignFanout over real HTTP: each region's job is in its branch's own history
(a CampaignRegion execution), and GET /runs/{name} reads it there, so a launched job is not
shown as planned while the fan-out runs."""

from __future__ import annotations

import time

import pytest

from tests.integration.conftest import serving
from traingrid_local.api.client import ApiClient
from traingrid_local.stack import sample_campaign

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    with serving(tmp_path_factory, 3600, "in-flight") as api:
        yield ApiClient(api.url, timeout=30)


def test_a_running_fanout_shows_each_regions_job_from_its_branch(client):
    name = client.call("POST", f"/campaigns/{sample_campaign.CAMPAIGN}/runs",
                       {"name": "in-flight", "datasets": "all"},
                       headers={"Idempotency-Key": "in-flight"}).body["name"]
    seen: set[tuple[str, str]] = set()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        run = client.get(f"/runs/{name}")
        if run["status"] != "RUNNING":
            break
        seen |= {(job["requested_region"], job["status"]) for job in run.get("jobs", [])}
        time.sleep(0.05)
    assert run["status"] == "SUCCEEDED", run["cause"]
    in_flight = {region for region, status in seen if status == "InProgress"}
    assert in_flight == set(sample_campaign.REGION_PRICES), seen
