"""The served API's edges, over real HTTP on 127.0.0.1 (`traingrid serve`, raw sockets where the
HTTP layer is under test):

- GET /costs answers a page of groups at a time: thousands of failed runs, each of its own
  dataset, never make one answer past Lambda's 6 MB, and `traingrid costs` still shows them all.
- A time in a query is an RFC 3339 date-time with its offset that exists in UTC: anything else
  is a 400 naming the parameter, never a 500.
- Tokens are unsigned and checked field by field: a forged plan's token or costs token is a
  400 saying why, never a negative plan or a 500.
- A dataset's prefix is the key it shows (no invisible character, no NFKC lookalike, no dot
  segment).
- A console path too long for the file system is a 404 naming no path of this machine.
- What the HTTP layer refuses (414, 431, 505, 400) is answered in the API's JSON error shape; a
  connection idle past its timeout is closed; the request log escapes control characters.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import time
import zlib
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode, urlsplit

import pytest
from typer.testing import CliRunner

from tests.integration.conftest import serving
from traingrid import opaque
from traingrid.costs.period import MAX_PAGE_GROUPS
from traingrid.db.engine import transaction
from traingrid.db.repositories import TrainingRunRepository
from traingrid_local.api.connections import IDLE_TIMEOUT_S
from traingrid_local.api.server import ApiServer
from traingrid_local.cli.main import app
from traingrid_local.stack.environment import DEMO_BUCKET
from traingrid_local.templates import PROJECT_ROOT

pytestmark = pytest.mark.e2e

T0 = datetime(2026, 10, 1, tzinfo=UTC)
PERIOD = {"since": "2026-10-01T00:00:00Z", "until": "2026-10-02T00:00:00Z"}
FAILED_RUNS = 5000
# Lambda's response payload limit: a larger answer is API Gateway's 502.
LAMBDA_ANSWER = 6 * 1024 * 1024
# The longest key a dataset may have, in 4-byte characters: the largest a group's name gets.
WIDEST = "\U0001f3ce" * 253
DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"


def failed_dataset(index: int) -> str:
    return f"s3://{DEMO_BUCKET}/{index:05d}/{WIDEST}/"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """The served API with FAILED_RUNS cheap failed runs recorded, each of its own dataset."""
    with serving(tmp_path_factory, 600, "edges", throttled=False) as api:
        cost = {"actual": {"compute": 0.01, "file_system": 0.02, "orchestration": 0.0001,
                           "staging": 0.0, "total": 0.0301}}
        with transaction(api.deployment.database_url) as session:
            runs = TrainingRunRepository(session)
            for index in range(FAILED_RUNS):
                started = T0 + timedelta(seconds=index)
                runs.record({
                    "execution_arn": f"arn:aws:states:us-east-1:1:execution:m:failed-{index}",
                    "name": f"failed-{index}", "status": "FAILED", "started_at": started,
                    "ended_at": started + timedelta(minutes=3),
                    "dataset": failed_dataset(index), "instance_type": "p4d.24xlarge",
                    "recorded_by": "run", "cost": cost, "cost_usd": 0.0301})
        yield api


def get(url: str, target: str, query: dict[str, str | int] | None = None
        ) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        connection.request("GET", target + (f"?{urlencode(query)}" if query else ""))
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def problems(status: int, data: bytes) -> list[dict[str, str]]:
    assert status == 400, (status, data[:500])
    return json.loads(data)["problems"]


def test_thousands_of_groups_come_a_page_at_a_time_each_inside_lambdas_answer(served):
    status, data = get(served.url, "/costs", PERIOD)
    first = json.loads(data)
    assert status == 200 and len(first["groups"]) == 100 and first["next_token"]
    seen, pages, token = [], 0, None
    while True:
        query = {**PERIOD, "limit": MAX_PAGE_GROUPS} | ({"next_token": token} if token else {})
        status, data = get(served.url, "/costs", query)
        assert status == 200, data[:500]
        # The function's answer inside Lambda's envelope, where the body is a JSON string.
        assert len(json.dumps({"statusCode": 200, "body": data.decode()})) < LAMBDA_ANSWER / 2
        page = json.loads(data)
        assert len(page["groups"]) <= MAX_PAGE_GROUPS and page["total"] == first["total"]
        seen += [group["dataset"] for group in page["groups"]]
        pages += 1
        token = page["next_token"]
        if token is None:
            break
    assert pages == FAILED_RUNS // MAX_PAGE_GROUPS
    assert sorted(seen) == sorted(failed_dataset(i) for i in range(FAILED_RUNS))
    assert first["total"] == pytest.approx(FAILED_RUNS * 0.0301)


def test_traingrid_costs_shows_every_page(served):
    result = CliRunner().invoke(app, ["costs", "--endpoint", served.url, "--since",
                                      PERIOD["since"], "--until", PERIOD["until"], "--json"])
    assert result.exit_code == 0, result.output[-2000:]
    found = json.loads(result.stdout)
    assert len(found["groups"]) == FAILED_RUNS and "next_token" not in found
    assert found == json.loads(CliRunner().invoke(app, [
        "costs", "--database-url", served.deployment.database_url, "--since", PERIOD["since"],
        "--until", PERIOD["until"], "--json"]).stdout)


def test_a_costs_token_is_refused_with_another_period_or_forged(served):
    _, data = get(served.url, "/costs", {**PERIOD, "limit": 1})
    token = json.loads(data)["next_token"]
    other = {**PERIOD, "by": "status", "limit": 1, "next_token": token}
    (problem,) = problems(*get(served.url, "/costs", other))
    assert problem["pointer"] == "/next_token" and "another period or grouping" in (
        problem["message"])
    for forged in ({**PERIOD, "by": "dataset", "after": [1e308 * 10, "x"]},
                   {**PERIOD, "by": "dataset", "after": "x"}, [[[[]]]]):
        (problem,) = problems(*get(served.url, "/costs", {
            "next_token": opaque.encode(forged)}))
        assert problem["pointer"] == "/next_token", problem
    (problem,) = problems(*get(served.url, "/costs", {"next_token": "bm90LWEtdG9rZW4"}))
    assert problem["pointer"] == "/next_token"


TIMES = {
    "an offset that leaves year 9999": ("since", "9999-12-31T23:59:59-23:59"),
    "an offset before year 1": ("until", "0001-01-01T00:00:00+23:59"),
    "a day that does not exist": ("since", "2026-02-30T00:00:00Z"),
    "no zone": ("since", "2026-11-01T00:00:00"),
}


@pytest.mark.parametrize("case", TIMES)
def test_a_costs_time_that_is_no_instant_is_a_400_naming_it(served, case):
    name, value = TIMES[case]
    (problem,) = problems(*get(served.url, "/costs", {name: value}))
    assert problem["pointer"] == f"/{name}", problem


@pytest.mark.parametrize("value", ["2026-11-01T00:00:00", "2026-11-01", "1700000000",
                                   "9999-12-31T23:59:59-23:59"])
@pytest.mark.parametrize("name", ["start", "end"])
def test_a_metrics_time_without_its_zone_or_out_of_range_is_a_400(served, name, value):
    (problem,) = problems(*get(served.url, "/runs/any-run/metrics", {name: value}))
    assert problem["pointer"] == f"/{name}", problem


def post(url: str, target: str, body: object) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        connection.request("POST", target, json.dumps(body),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def plans_token(measuring: object, request: object = None) -> str:
    request = request if request is not None else {"dataset": DATASET, "nodes": 2}
    return opaque.encode({"request": request, "measuring": measuring})


PROGRESS = {"objects": 10, "bytes": 10**9, "pages": 1, "parts": 1,
            "after": "imagenet2012/resized/a"}
FORGED_PLANS = {
    "negative counts": plans_token({**PROGRESS, "objects": -5, "bytes": -10**12}),
    "a count of 4,001 digits": plans_token({**PROGRESS, "bytes": 10**4000}),
    "a count that is text": plans_token({**PROGRESS, "pages": "1"}),
    "no progress": plans_token(None),
}


@pytest.mark.parametrize("case", FORGED_PLANS)
def test_a_forged_plans_token_is_a_400_not_a_plan_or_a_500(served, case):
    status, data = get(served.url, f"/plans/{FORGED_PLANS[case]}")
    assert status == 400, (status, data[:500])
    assert "this is not a plan's token" in data.decode()


def test_a_deeply_nested_plans_token_is_a_400_not_a_recursion_error(served):
    text = '{"request": ' + "[" * 20_000 + "]" * 20_000 + ', "measuring": {}}'
    token = base64.urlsafe_b64encode(zlib.compress(text.encode(), 9)).decode().rstrip("=")
    status, data = get(served.url, f"/plans/{token}")
    assert status == 400 and "nested more than 32 levels deep" in data.decode(), data[:500]


PREFIXES = {
    "Arabic letter mark": "image\u061cnet/",
    "zero-width space": "image\u200bnet/",
    "byte order mark": "\ufeffimagenet/",
    "fullwidth runs": "\uff52\uff55\uff4e\uff53/",
    "dot then runs": "./runs/",
    "empty segment": "imagenet2012//resized/",
}


@pytest.mark.parametrize("target", ["/runs", "/plans"])
@pytest.mark.parametrize("case", PREFIXES)
def test_a_prefix_that_is_another_key_than_it_shows_is_a_400(served, target, case):
    body = {"dataset": f"s3://{DEMO_BUCKET}/{PREFIXES[case]}", "nodes": 2}
    found = problems(*post(served.url, target, body))
    assert [p["pointer"] for p in found] == ["/dataset"], found


def test_a_console_path_too_long_for_the_file_system_is_a_404_naming_no_path(served):
    status, data = get(served.url, "/console/static/" + "a" * 5000)
    assert status == 404, (status, data[:500])
    assert str(PROJECT_ROOT) not in data.decode() and "is not a page of the console" in (
        data.decode())


def exchange(url: str, request: bytes, timeout: float = 30) -> tuple[bytes, float]:
    """What the server sends back on a raw connection until it closes it, and how long that
    took."""
    parts = urlsplit(url)
    started = time.monotonic()
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as raw:
        raw.sendall(request)
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    return answer, time.monotonic() - started


def host(url: str) -> bytes:
    return f"Host: {urlsplit(url).netloc}\r\n".encode()


PROTOCOL_ERRORS = {
    "a request line over 64 KiB": (414, lambda h: b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n"
                                   + h + b"\r\n"),
    "a header line over 64 KiB": (431, lambda h: b"GET /runs HTTP/1.1\r\n" + h + b"X: "
                                  + b"a" * 70_000 + b"\r\n\r\n"),
    "over 100 headers": (431, lambda h: b"GET /runs HTTP/1.1\r\n" + h + b"".join(
        b"X-%d: a\r\n" % i for i in range(120)) + b"\r\n"),
    "HTTP/2": (505, lambda h: b"GET /runs HTTP/2.0\r\n" + h + b"\r\n"),
    "a version that is none": (400, lambda h: b"GET /runs FOO/1.1\r\n" + h + b"\r\n"),
    "a request line of four words": (400, lambda h: b"GET /runs x HTTP/1.1\r\n" + h
                                     + b"\r\n"),
}


@pytest.mark.parametrize("case", PROTOCOL_ERRORS)
def test_what_the_http_layer_refuses_is_answered_in_the_apis_json(served, case):
    code, request = PROTOCOL_ERRORS[case]
    answer, _ = exchange(served.url, request(host(served.url)))
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    assert status_line.startswith(f"HTTP/1.1 {code} "), answer[:300]
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    assert headers["content-type"] == "application/json" and headers["connection"] == "close"
    assert int(headers["content-length"]) == len(body)
    assert set(json.loads(body)) == {"message"}


def stub(event: dict) -> dict:
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}


def test_an_idle_connection_is_closed_after_its_timeout():
    assert 0 < IDLE_TIMEOUT_S <= 120  # the served API's own
    with ApiServer(stub, port=0, routes=[("GET", "/runs")], idle_timeout_s=1) as server:
        answer, waited = exchange(server.url, b"")
        assert answer == b"" and 0.9 < waited < 10
        # Or one that stops halfway through its request.
        answer, waited = exchange(server.url, b"GET /runs HTTP/1.1\r\n" + host(server.url))
        assert answer == b"" and 0.9 < waited < 10
        answer, _ = exchange(server.url, b"GET /runs HTTP/1.1\r\n" + host(server.url)
                             + b"\r\n")
        assert answer.startswith(b"HTTP/1.1 200 ")


def test_the_request_log_escapes_control_characters():
    lines: list[str] = []
    with ApiServer(stub, port=0, routes=[("GET", "/runs")], request_log=lines.append) as server:
        exchange(server.url, b"GET /runs?\x1b]0;owned\x07\x1b[2J\x7f HTTP/1.1\r\n"
                 + host(server.url) + b"Connection: close\r\n\r\n")
    (line,) = lines
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in line), repr(line)
    assert "\\x1b]0;owned\\x07\\x1b[2J\\x7f" in line
