"""Many runs at once through the API: API Gateway's stage throttling (the template's burst and
rate) refuses what exceeds it with 429, and the client retries it, so no user sees it; runs
sent together all end, recorded, with nothing left behind, and the campaign database sees one
pool per Lambda execution environment, as from Lambda. ``make bench``'s ``scale.concurrent``
(``traingrid_local.bench_scale_concurrent``) is the full 100 runs and 10 fan-outs."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from traingrid_local import bench_scale_concurrent
from traingrid_local.api.client import ApiClient
from traingrid_local.api.server import ApiServer
from traingrid_local.api.throttle import TokenBucket, stage_limits

pytestmark = pytest.mark.e2e


def answered(event: dict) -> dict:
    return {"statusCode": 202, "headers": {"Content-Type": "application/json"},
            "body": '{"name": "run"}'}


def burst(url: str, count: int, retrying: bool) -> list[int]:
    """``count`` POST /runs released at once; each one's status."""
    gate = threading.Barrier(count)

    def send(_: int) -> int:
        gate.wait(30)
        if retrying:
            return ApiClient(url, timeout=30).request("POST", "/runs", {"dataset": "s3://b/d/"}).status
        request = urllib.request.Request(url + "/runs", data=b"{}", method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(send, range(count)))


def test_the_stage_throttles_a_burst_as_api_gateway_and_the_client_retries_it():
    rate, limit = stage_limits()
    assert (rate, limit) == (20.0, 50)  # the template's MethodSettings
    # A bucket that refills slowly, so the burst beyond it is refused for certain.
    with ApiServer(answered, 0, throttle=TokenBucket(rate=1, burst=10)) as server:
        statuses = burst(server.url, 30, retrying=False)
    assert statuses.count(202) <= 12 and statuses.count(429) >= 18, statuses

    bucket = TokenBucket(rate, limit)
    with ApiServer(answered, 0, throttle=bucket) as server:
        statuses = burst(server.url, 2 * limit + 10, retrying=True)
    assert statuses == [202] * (2 * limit + 10)
    assert bucket.refused > 0  # throttled, and no one saw it


def test_runs_and_fanouts_sent_together_all_end_recorded_with_nothing_leaked():
    figure = bench_scale_concurrent.measure(runs=10, fanouts=2, timeout_s=240)
    assert figure["refused_count"] == 0, figure["refused"]
    assert (figure["lost"], figure["failed_count"]) == (0, 0), figure["failed"]
    assert figure["leaked"] == 0, figure["leaked_resources"]
    if figure["database"] != "postgresql":
        pytest.skip("PostgreSQL is not reachable: connections not counted")
    concurrency = figure["lambda_peak_concurrency"]
    # Each execution environment of a database function holds its own pool (one connection
    # here), as on Lambda: the server sees as many connections as those environments, more
    # than one (the 12 requests and the runs' records came at once), never more.
    assert 1 < figure["peak_db_connections"] <= figure["database_environments"], figure
    assert max(concurrency.values()) > 1, concurrency
