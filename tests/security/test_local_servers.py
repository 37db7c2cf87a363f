"""The two local servers under attack, over real HTTP on 127.0.0.1.

`traingrid serve` (the API over the emulator) and `traingrid console --stack` (a deployed
stack's console, whose API requests go on signed with the user's AWS credentials) answer only
their own Host, no foreign Origin, and only JSON bodies: a page elsewhere can neither send them
a simple (form or text/plain) request nor, through DNS rebinding, read them. The console of a
stack also wants its per-session token and sends on only the API's declared routes. Both read
at most 6 MB of a body however it is framed (a chunked one declares no length). Each attack is
refused with a JSON error, and nothing starts: no run in the emulator, no request reaching the
stack (a local recording stand-in, signed requests and all).
"""

from __future__ import annotations

import http.client
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import boto3
import pytest
from moto import mock_aws

from tests.integration.conftest import serving
from traingrid_local.api.client import TOKEN_HEADER, ApiClient
from traingrid_local.api.server import ApiServer
from traingrid_local.console.remote import remote
from traingrid_local.stack.environment import DEMO_BUCKET

pytestmark = pytest.mark.e2e

RUN = json.dumps({"dataset": f"s3://{DEMO_BUCKET}/imagenet2012/resized/", "nodes": 2})
EVIL = "http://evil.example"
JSON_TYPE = {"Content-Type": "application/json"}
SIGNED = re.compile(r"AWS4-HMAC-SHA256 Credential=\w+/\d{8}/eu-west-1/execute-api/aws4_request, "
                    r"SignedHeaders=[a-z;-]*host[a-z;-]*, Signature=[0-9a-f]{64}")


def send(url: str, method: str, target: str, body: str | bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, http.client.HTTPResponse, object]:
    """One request as sent by hand: any Host, target and headers; (status, response, JSON)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request(method, target, body, headers or {})
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    try:
        answer = json.loads(data) if data else None
    except ValueError:
        answer = data.decode("utf-8", "replace")
    return response.status, response, answer


def chunked(data: bytes, size: int = 64 * 1024) -> bytes:
    """``data`` framed as Transfer-Encoding: chunked frames it."""
    frames = [b"%x\r\n%s\r\n" % (len(data[i:i + size]), data[i:i + size])
              for i in range(0, len(data), size)]
    return b"".join(frames) + b"0\r\n\r\n"


def send_chunked(url: str, target: str, framed: bytes, headers: dict[str, str] | None = None
                 ) -> tuple[int, http.client.HTTPResponse, object]:
    """A JSON POST whose body goes as the bytes ``framed``, declared chunked (no length)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.putrequest("POST", target)
        for name, value in {**JSON_TYPE, "Transfer-Encoding": "chunked",
                            **(headers or {})}.items():
            connection.putheader(name, value)
        connection.endheaders()
        connection.send(framed)
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    try:
        return response.status, response, json.loads(data)
    except ValueError:
        return response.status, response, data.decode("utf-8", "replace")


# A run's request padded past 6 MB (JSON allows the blanks); then chunked bodies framed wrong.
FRAMINGS = {
    "chunked body over 6 MB": (chunked(RUN.encode() + b" " * (7 * 1024 * 1024)), 413),
    "chunk size not hex": (b"zz\r\n{}\r\n0\r\n\r\n", 400),
    "chunk longer than its size": (b"1\r\n{}\r\n0\r\n\r\n", 400),
}


def assert_refused(status: int, response: http.client.HTTPResponse, answer: object,
                   expected: int, *words: str) -> None:
    assert status == expected, (status, answer)
    assert response.getheader("Content-Type") == "application/json"
    assert isinstance(answer, dict) and answer["message"], answer
    for word in words:
        assert word in answer["message"], answer
    assert not [name for name, _ in response.getheaders()
                if name.lower().startswith("access-control-")], response.getheaders()


# --- traingrid serve ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with serving(tmp_path_factory, 600, "security", throttled=False) as api:  # not 429s
        yield api


def run_names(url: str) -> set[str]:
    return {run["name"] for run in ApiClient(url, timeout=60).get("/runs", limit=100)["runs"]}


def host_of(url: str) -> str:
    return urlsplit(url).netloc


SERVE_ATTACKS = {
    # A page's <form> or fetch(no-cors): no preflight, so the browser sends them as they are.
    "text/plain POST": ("POST", "/runs", RUN, {"Content-Type": "text/plain"}, 415),
    "form POST": ("POST", "/runs", "dataset=s3://x/", {
        "Content-Type": "application/x-www-form-urlencoded"}, 415),
    "form POST from a page": ("POST", "/runs", RUN, {
        "Content-Type": "application/x-www-form-urlencoded", "Origin": EVIL}, 403),
    "multipart POST": ("POST", "/runs", "--b\r\n\r\n" + RUN + "\r\n--b--\r\n", {
        "Content-Type": "multipart/form-data; boundary=b"}, 415),
    "POST without a body or type": ("POST", "/campaigns/av-drive-2026-11/runs", None, {}, 400),
    "empty text/plain POST": ("POST", "/campaigns/av-drive-2026-11/runs", "", {
        "Content-Type": "text/plain"}, 415),
    "text/plain tick": ("POST", "/_emulator/tick", "{}", {"Content-Type": "text/plain"}, 415),
    "JSON from a foreign Origin": ("POST", "/runs", RUN, {**JSON_TYPE, "Origin": EVIL}, 403),
    "Origin null (a sandboxed frame, a file)": ("POST", "/runs", RUN, {
        **JSON_TYPE, "Origin": "null"}, 403),
    "Origin of another local port": ("POST", "/runs", RUN, {
        **JSON_TYPE, "Origin": "http://127.0.0.1:1"}, 403),
    "preflight from a foreign Origin": ("OPTIONS", "/runs", None, {
        "Origin": EVIL, "Access-Control-Request-Method": "POST"}, 403),
    # DNS rebinding: evil.example now resolves to 127.0.0.1, the page is same-origin with it.
    "rebound Host, POST": ("POST", "/runs", RUN, {**JSON_TYPE, "Host": "attacker.example"}, 403),
    "rebound Host, GET": ("GET", "/runs", None, {"Host": "attacker.example:8000"}, 403),
    "rebound Host, tick": ("POST", "/_emulator/tick", "{}", {
        **JSON_TYPE, "Host": "attacker.example"}, 403),
    "rebound Host, console": ("GET", "/console/config.json", None, {
        "Host": "evil.example"}, 403),
}


@pytest.mark.parametrize("attack", SERVE_ATTACKS)
def test_serve_refuses_what_a_page_elsewhere_could_send(served, attack):
    method, target, body, headers, expected = SERVE_ATTACKS[attack]
    if "Host" in headers and ":8000" in headers["Host"]:
        headers = {**headers, "Host": f"attacker.example:{urlsplit(served.url).port}"}
    before = run_names(served.url)
    assert_refused(*send(served.url, method, target, body, headers), expected)
    assert run_names(served.url) == before  # nothing started, no schedule fired


@pytest.mark.parametrize("target", ["/runs", "/_emulator/tick"])
@pytest.mark.parametrize("framing", FRAMINGS)
def test_serve_reads_at_most_6_mb_of_a_body_however_it_is_framed(served, framing, target):
    framed, expected = FRAMINGS[framing]
    before = run_names(served.url)
    assert_refused(*send_chunked(served.url, target, framed), expected)
    assert run_names(served.url) == before


# Bodies the tick cannot read as its settings (jobs: names, at: a time).
TICK_BODIES = {"a list": "[1]", "text": '"retrain"', "a number": "5", "true": "true",
               "jobs a number": '{"jobs": 5}', "jobs of numbers": '{"jobs": [1]}',
               "jobs of lists": '{"jobs": [["retrain"]]}', "jobs of objects": '{"jobs": [{}]}',
               "not JSON": "{jobs"}


@pytest.mark.parametrize("body", TICK_BODIES)
def test_the_tick_refuses_a_body_of_another_shape_in_json(served, body):
    before = run_names(served.url)
    assert_refused(*send(served.url, "POST", "/_emulator/tick", TICK_BODIES[body], JSON_TYPE),
                   400)
    assert run_names(served.url) == before


def test_serve_answers_its_own_names_and_same_origin_pages(served):
    port = urlsplit(served.url).port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        status, response, answer = send(served.url, "GET", "/runs?limit=1", None,
                                        {"Host": host})
        assert status == 200, (host, answer)
        assert response.getheader("Access-Control-Allow-Origin") is None
    status, _, answer = send(served.url, "POST", "/runs", RUN, {
        "Content-Type": "application/json; charset=utf-8", "Origin": f"http://localhost:{port}",
        "Idempotency-Key": "same-origin"})
    assert status == 202, answer
    # curl with -H 'Content-Type: application/json', the CLI and the notebook's client.
    assert ApiClient(served.url).call("POST", "/runs", json.loads(RUN),
                                      headers={"Idempotency-Key": "client"}).status == 202
    status, _, answer = send(served.url, "POST", "/runs", RUN, {"Content-Type": "text/plain"})
    assert "Content-Type: application/json" in answer["message"], answer


# --- traingrid console --stack -----------------------------------------------------------------

class RecordingStack(BaseHTTPRequestHandler):
    """The stack's API: records every request whatever its method, answers 200 in JSON."""

    seen: list[dict[str, str]] = []

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        RecordingStack.seen.append(dict(self.headers) | {
            "method": self.command, "path": self.path,
            "body": self.rfile.read(length).decode() if length else ""})
        body = json.dumps({"runs": [], "next_token": None}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _record  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def stack_api():
    server = ThreadingHTTPServer(("127.0.0.1", 0), RecordingStack)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture(scope="module")
def console(stack_api):
    """`traingrid console --stack traingrid-prod --region eu-west-1` on a free port."""
    patch = pytest.MonkeyPatch()
    patch.setenv("AWS_ACCESS_KEY_ID", "testing")
    patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    # A one-state machine each: the graphs are not what is attacked here.
    definition = json.dumps({"StartAt": "Plan", "States": {"Plan": {"Type": "Pass",
                                                                    "End": True}}})
    definitions = {"TrainingRun": definition, "CampaignFanout": definition}
    try:
        with mock_aws():
            sfn = boto3.client("stepfunctions", region_name="eu-west-1")
            outputs = {f"{name}StateMachineArn": {"Value": sfn.create_state_machine(
                name=f"traingrid-{name}", definition=text,
                roleArn="arn:aws:iam::123456789012:role/states")["stateMachineArn"]}
                for name, text in definitions.items()}
            template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                        "Outputs": {"ApiUrl": {"Value": stack_api}, **outputs}}
            boto3.client("cloudformation", region_name="eu-west-1").create_stack(
                StackName="traingrid-prod", TemplateBody=json.dumps(template))
            with remote("traingrid-prod", "eu-west-1", port=0) as server:
                yield server
    finally:
        patch.undo()


@pytest.fixture
def seen():
    RecordingStack.seen = []
    return RecordingStack.seen


def cookie_of(server) -> str:
    status, response, _ = send(server.url, "GET", f"/console?token={server.token}")
    assert status == 303
    return response.getheader("Set-Cookie").split(";")[0]


# What a browser says of a request from the console's own page (Fetch Metadata).
OWN_PAGE = {"Sec-Fetch-Site": "same-origin"}


CONSOLE_ATTACKS = {
    # The token (header or cookie) is added to each attack unless it is the thing attacked.
    "no token": ("GET", "/runs", None, {}, None, 403),
    "wrong token header": ("GET", "/runs", None, {"X-TrainGrid-Token": "guess"}, None, 403),
    "wrong Authorization token": ("GET", "/runs", None, {"Authorization": "Token guess"},
                                  None, 403),
    "wrong cookie": ("GET", "/runs", None, {}, "cookie-wrong", 403),
    "wrong token in the URL": ("GET", "/console?token=guess", None, {}, None, 403),
    "no token, the page": ("GET", "/console/config.json", None, {}, None, 403),
    "text/plain POST": ("POST", "/runs", RUN, {"Content-Type": "text/plain"}, "cookie", 415),
    "form POST": ("POST", "/runs", RUN, {
        "Content-Type": "application/x-www-form-urlencoded"}, "cookie", 415),
    "form POST from a page": ("POST", "/runs", RUN, {
        "Content-Type": "application/x-www-form-urlencoded", "Origin": EVIL}, "cookie", 403),
    "JSON from a foreign Origin": ("POST", "/runs", RUN, {**JSON_TYPE, "Origin": EVIL},
                                   "cookie", 403),
    "rebound Host": ("GET", "/runs", None, {"Host": "attacker.example"}, "header", 403),
    "rebound Host, POST": ("POST", "/runs", RUN, {**JSON_TYPE, "Host": "attacker.example"},
                           "header", 403),
    "dot-dot out of the route": ("GET", "/runs/../../admin", None, {}, "header", 400),
    "dot-dot to another route": ("GET", "/runs/x/../../campaigns", None, {}, "header", 400),
    "encoded dots": ("GET", "/runs/%2e%2e/campaigns", None, {}, "header", 400),
    "encoded dots, upper case": ("GET", "/runs/%2E%2E", None, {}, "header", 400),
    "encoded slash": ("GET", "/runs/a%2F..%2Fb/logs", None, {}, "header", 400),
    "backslash": ("GET", "/runs/..\\..\\x", None, {}, "header", 400),
    "empty segment": ("GET", "/runs//logs", None, {}, "header", 400),
    "dot segment": ("GET", "/./runs", None, {}, "header", 400),
    "undeclared path": ("GET", "/admin", None, {}, "header", 404),
    "the stage's own path": ("GET", "/v1/runs", None, {}, "header", 404),
    "undeclared method": ("DELETE", "/runs/some-run", None, JSON_TYPE, "header", 405),
    "undeclared method, PUT": ("PUT", "/runs", RUN, JSON_TYPE, "header", 405),
    "undeclared method, on a page": ("POST", "/console", "{}", JSON_TYPE, "header", 405),
}


@pytest.mark.parametrize("attack", CONSOLE_ATTACKS)
def test_the_console_of_a_stack_refuses_and_sends_nothing_on(console, seen, attack):
    method, target, body, headers, credential, expected = CONSOLE_ATTACKS[attack]
    headers = dict(headers)
    if credential == "header":
        headers["X-TrainGrid-Token"] = console.token
    elif credential == "cookie":
        headers |= {"Cookie": cookie_of(console)} | OWN_PAGE
    elif credential == "cookie-wrong":
        headers |= {"Cookie": cookie_of(console).split("=")[0] + "=guess"} | OWN_PAGE
    assert_refused(*send(console.url, method, target, body, headers), expected)
    assert seen == []


@pytest.mark.parametrize("framing", FRAMINGS)
def test_the_console_of_a_stack_reads_at_most_6_mb_however_framed(console, seen, framing):
    framed, expected = FRAMINGS[framing]
    assert_refused(*send_chunked(console.url, "/runs", framed, {TOKEN_HEADER: console.token}),
                   expected)
    assert seen == []


def test_the_printed_url_trades_its_token_for_a_strict_http_only_cookie(console, seen):
    status, response, _ = send(console.url, "GET",
                               f"/console?token={console.token}&x=1", None)
    assert status == 303
    assert response.getheader("Location") == "/console?x=1"
    cookie = response.getheader("Set-Cookie")
    attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= attributes, cookie
    assert console.token not in response.getheader("Location")
    # A path that a browser would read as another host is not where it sends you.
    status, response, _ = send(console.url, "GET", f"//evil.example/?token={console.token}")
    assert status == 303 and not response.getheader("Location").startswith("//")
    status, response, _ = send(console.url, "GET", f"/\\evil.example/?token={console.token}")
    assert status == 303 and response.getheader("Location").startswith("/evil.example")
    assert seen == []


def test_with_its_token_the_console_sends_declared_routes_on_signed(console, seen):
    cookie = cookie_of(console)
    status, _, answer = send(console.url, "GET", "/runs?limit=5", None,
                             {"Cookie": cookie} | OWN_PAGE)
    assert (status, answer) == (200, {"runs": [], "next_token": None})
    # Typed in the address bar, or a bookmark.
    status, _, _ = send(console.url, "GET", "/console/config.json", None,
                        {"Cookie": cookie, "Sec-Fetch-Site": "none"})
    assert status == 200
    status, _, _ = send(console.url, "POST", "/runs", RUN, {
        **JSON_TYPE, "Authorization": f"Token {console.token}", "Idempotency-Key": "k-1",
        "Origin": urlsplit(console.url)._replace(path="").geturl()})
    assert status == 200
    client = ApiClient(console.url, token=console.token)
    assert client.get("/runs/some-run/logs") == {"runs": [], "next_token": None}
    assert [(r["method"], r["path"]) for r in seen] == [
        ("GET", "/v1/runs?limit=5"), ("POST", "/v1/runs"), ("GET", "/v1/runs/some-run/logs")]
    for request in seen:
        assert SIGNED.fullmatch(request["Authorization"]), request
        assert "Cookie" not in request and "X-TrainGrid-Token" not in request
    assert seen[1]["body"] == RUN and seen[1]["Idempotency-Key"] == "k-1"


@pytest.mark.parametrize("site", ["same-site", "cross-site", None])
def test_the_cookie_is_not_honoured_on_requests_from_another_page(console, seen, site):
    """Cookies are shared by every port of 127.0.0.1, and SameSite counts them all as one
    site: a page another local server serves (its <img>, its link) would send this
    console's cookie along. The browser marks such a request same-site; one that says
    nothing is no browser that the cookie can be trusted from."""
    headers = {"Cookie": cookie_of(console)} | ({"Sec-Fetch-Site": site} if site else {})
    for target in ("/runs?limit=5", "/runs/some-run/logs", "/console/config.json"):
        assert_refused(*send(console.url, "GET", target, None, headers), 403,
                       "honoured only on requests from this console's own pages")
    assert seen == []


def test_a_cookie_of_a_console_on_another_port_is_not_honoured(console, seen):
    """Each console's cookie carries its own port in its name and its own token."""
    with ApiServer(lambda event: {"statusCode": 200, "body": "{}"}, 0,
                   routes=[("GET", "/runs")], token=True) as other:
        theirs = cookie_of(other)
        name, _, value = theirs.partition("=")
        assert name == f"traingrid-console-{urlsplit(other.url).port}"
        ours_by_name = f"traingrid-console-{urlsplit(console.url).port}={value}"
        for cookie in (theirs, ours_by_name):
            assert_refused(*send(console.url, "GET", "/runs", None,
                                 {"Cookie": cookie} | OWN_PAGE), 403)
    assert seen == []


# The token's parameter however its name is spelled: werkzeug decodes names, so each signs in.
TOKEN_SPELLINGS = ["token", "%74oken", "tok%65n", "%74%6F%6B%65%6E", "%54oken", "TOKEN",
                   "token%20", "+token"]


def test_the_log_never_shows_the_token_however_its_name_is_encoded():
    logged: list[str] = []
    with ApiServer(lambda event: {"statusCode": 200, "body": "{}"}, 0, logged.append,
                   routes=[("GET", "/runs")], token=True) as server:
        for spelling in TOKEN_SPELLINGS:
            for target in (f"/console?{spelling}={server.token}",
                           f"/console?x=1&{spelling}={server.token}&y=2",
                           f"/runs?{spelling}={server.token}"):
                send(server.url, "GET", target, None, {TOKEN_HEADER: server.token})
        assert send(server.url, "GET", f"/console?%74oken={server.token}")[0] == 303
    assert len(logged) == 3 * len(TOKEN_SPELLINGS) + 1
    assert not [line for line in logged if server.token in line], logged
    assert "GET /console?x=1&%74oken=…&y=2 → " in "\n".join(logged), logged


def test_no_answer_carries_cors_headers_and_the_log_never_shows_the_token():
    """Whatever the function behind answers, no page elsewhere is allowed to read it."""
    logged: list[str] = []

    def permissive(event: dict) -> dict:
        return {"statusCode": 200, "body": "{}", "headers": {
            "Content-Type": "application/json", "Access-Control-Allow-Origin": "*"},
            "multiValueHeaders": {"access-control-allow-credentials": ["true"]}}

    with ApiServer(permissive, 0, logged.append, routes=[("GET", "/runs")],
                   token=True) as server:
        status, response, _ = send(server.url, "GET", "/runs", None,
                                   {TOKEN_HEADER: server.token})
        assert send(server.url, "GET", f"/console?token={server.token}")[0] == 303
    assert status == 200
    assert not [name for name, _ in response.getheaders()
                if name.lower().startswith("access-control-")], response.getheaders()
    assert len(logged) == 2 and not [line for line in logged if server.token in line], logged
