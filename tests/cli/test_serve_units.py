"""The pieces of `traingrid serve` and `traingrid tick`: requests as API Gateway proxy events,
the routes of the template, when a schedule last came due."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from traingrid_local.api.server import (
    api_routes,
    match_route,
    openapi_routes,
    own_hosts,
    path_problem,
    proxy_event,
    split_target,
)
from traingrid_local.stack.cron_expression import interval_seconds, last_due

ROUTES = api_routes()
SUNDAY = datetime(2026, 11, 22, 10, 17, 42, tzinfo=UTC)


def test_the_routes_are_the_api_functions_events():
    assert ("POST", "/runs") in ROUTES and ("GET", "/runs/{name}") in ROUTES
    assert match_route(ROUTES, "GET", "/runs/r-1/logs") == ("/runs/{name}/logs", {"name": "r-1"})
    assert match_route(ROUTES, "POST", "/campaigns/sf/runs") == (
        "/campaigns/{campaign_id}/runs", {"campaign_id": "sf"})
    assert match_route(ROUTES, "DELETE", "/runs/r-1") is None


def test_a_request_becomes_the_rest_proxy_event_api_gateway_sends():
    event = proxy_event(ROUTES, "POST", "/runs/a%20b?limit=2&limit=3&x=",
                        [("Content-Type", "application/json"), ("X-Tag", "1"),
                         ("X-Tag", "2")], b'{"nodes": 2}', "127.0.0.1", "127.0.0.1:8000")
    assert (event["httpMethod"], event["path"], event["resource"]) == (
        "POST", "/runs/a b", "/runs/a b")  # no POST route there: the path is the resource
    assert event["queryStringParameters"] == {"limit": "3", "x": ""}
    assert event["multiValueQueryStringParameters"] == {"limit": ["2", "3"], "x": [""]}
    assert event["headers"]["X-Tag"] == "2" and event["multiValueHeaders"]["X-Tag"] == ["1", "2"]
    assert event["body"] == '{"nodes": 2}' and event["isBase64Encoded"] is False
    context = event["requestContext"]
    assert (context["stage"], context["path"], context["identity"]["sourceIp"]) == (
        "v1", "/v1/runs/a b", "127.0.0.1")
    get = proxy_event(ROUTES, "GET", "/runs/r-1", [], b"", "127.0.0.1", "h")
    assert (get["resource"], get["pathParameters"], get["body"]) == (
        "/runs/{name}", {"name": "r-1"}, None)


def test_the_console_of_a_stack_sends_on_the_documents_routes_which_are_the_templates():
    assert sorted(openapi_routes()) == sorted(ROUTES)


@pytest.mark.parametrize("path", ["/runs", "/runs/a-1/logs", "/runs/a%20b", "/runs/"])
def test_a_plain_path_has_no_problem(path):
    assert path_problem(path) is None


@pytest.mark.parametrize(("path", "problem"), [
    ("/runs/..", "'..' segment"), ("/runs/./x", "'..' segment"), ("/a/../../b", "'..' segment"),
    ("/runs/%2e%2e", "hides a dot"), ("/runs/%2E.", "hides a dot"), ("/runs/a%2Fb", "hides"),
    ("/runs/a%5cb", "hides"), ("/runs/..\\x", "hides"), ("/runs//logs", "empty segment"),
    ("runs", "start with '/'"), ("/runs/a%00b", "control character")])
def test_a_path_that_could_climb_out_of_its_route_is_named(path, problem):
    assert problem in path_problem(path)


def test_the_server_answers_as_its_loopback_names_with_its_port():
    assert own_hosts(8123) == {"127.0.0.1:8123", "localhost:8123", "[::1]:8123"}
    assert "localhost" in own_hosts(80)
    assert split_target("//runs?x=1") == ("//runs", "x=1")
    assert split_target("http://h:1/runs?x=1") == ("/runs", "x=1")


def test_a_binary_body_is_sent_base64_encoded():
    event = proxy_event(ROUTES, "POST", "/runs", [], b"\xff\xfe", "127.0.0.1", "h")
    assert (event["body"], event["isBase64Encoded"]) == ("//4=", True)


@pytest.mark.parametrize(("expression", "due"), [
    ("cron(0 2 * * ? *)", "2026-11-22T02:00"),
    ("cron(*/15 * * * ? *)", "2026-11-22T10:15"),
    ("cron(0 9 ? * MON-FRI *)", "2026-11-20T09:00"),
    ("cron(0 18 ? * SUN *)", "2026-11-15T18:00"),
    ("cron(0 0 1 JAN,JUL ? *)", "2026-07-01T00:00"),
    ("rate(6 hours)", "2026-11-22T06:00"),
    ("rate(1 day)", "2026-11-22T00:00"),
    ("rate(5 minutes)", "2026-11-22T10:15"),
])
def test_when_a_schedule_last_came_due(expression, due):
    assert last_due(expression, SUNDAY).strftime("%Y-%m-%dT%H:%M") == due


@pytest.mark.parametrize("expression", [
    "cron(0 2 * *)", "at(2026-11-22T02:00:00)", "cron(0 2 L * ? *)", "cron(0 2 ? * 6#3 *)",
    "cron(0 25 * * ? *)", "cron(30 10 22 11 ? 2026)"])
def test_unsupported_schedules_say_so(expression):
    with pytest.raises(ValueError):
        last_due(expression, SUNDAY)


@pytest.mark.parametrize(("expression", "seconds"), [
    ("rate(15 minutes)", 900), ("rate(1 day)", 86400), ("rate(6 hours)", 21600),
    ("cron(*/15 * * * ? *)", 900), ("cron(0 2 * * ? *)", 86400),
    ("cron(0 9 ? * MON-FRI *)", 86400),  # from Sunday: Friday 09:00, Thursday 09:00
])
def test_how_often_a_schedule_comes_due(expression, seconds):
    assert interval_seconds(expression, SUNDAY) == seconds
