"""Bad input at every public entry, property-based: the API, the upload trigger, the schedule,
the state machines' first steps and the CLI.

The package shares one `traingrid serve` (the deployed, seeded emulator and its API on a
loopback port). Most examples call the deployed functions through the emulator's Lambda API,
with the events API Gateway, S3 and EventBridge send; some go over real HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import strategies as st

from tests.integration.conftest import serving
from traingrid_local.api.server import API_FUNCTION, api_routes, proxy_event
from traingrid_local.demo.served import Served

# Any JSON value, a little of everything.
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=10)
# What an attacker types: SQL, shell, markup, path tricks, control characters.
NASTY_TEXT = ["'; DROP TABLE campaigns; --", "\" OR 1=1 --", "$(rm -rf /)", "`id`", "[/]",
              "[bold]x[/bold]", "../../etc/passwd", "%00", "\x00", "a\nb", "\u202e", "🚀",
              "x" * 300, "", " ", "/", "?", "#", "..", "~"]
nasty_text = st.one_of(st.sampled_from(NASTY_TEXT), st.text(max_size=40))


def malformed_json() -> st.SearchStrategy[bytes]:
    """Bodies that are not (acceptable) JSON: bad syntax, other encodings, NaN, huge, deep."""
    return st.one_of(
        st.binary(max_size=64),
        st.sampled_from([b"", b"{", b"NaN", b'{"nodes": NaN}', b'{"nodes": Infinity}',
                         b'{"epochs": 1e999}', b"[" * 5000 + b"]" * 5000,
                         b'{"a":' * 40 + b"1" + b"}" * 40, "{\"dataset\": \"\udc80\"}".encode(
                             "utf-8", "surrogatepass"), b"\xef\xbb\xbf{}", b"null", b"0"]),
    )


def any_body() -> st.SearchStrategy[bytes]:
    return st.one_of(json_values.map(lambda v: json.dumps(v).encode()), malformed_json())


@pytest.fixture(scope="package")
def served_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory, 600, "fuzz") as api:
        yield api


@pytest.fixture(scope="package")
def invoke(served_api: Served) -> Callable[[str, Any], tuple[bool, Any]]:
    """``invoke(logical_id, event)`` → (failed, payload): a deployed function, called as
    Lambda calls it; ``failed`` is Lambda's function-error flag (an unhandled exception)."""
    client = served_api.emulator.client("lambda")
    resources = served_api.deployment.stack.resources

    def call(function: str, event: Any) -> tuple[bool, Any]:
        response = client.invoke(FunctionName=resources[function],
                                 Payload=json.dumps(event).encode())
        return "FunctionError" in response, json.loads(response["Payload"].read() or b"null")

    return call


@pytest.fixture(scope="package")
def api_request(invoke) -> Callable[..., tuple[int, dict[str, str], Any]]:
    """``api_request(method, target, body, headers)`` → (status, headers, JSON body): the
    proxy event API Gateway sends for that HTTP request, to the deployed API function."""
    routes = api_routes()

    def request(method: str, target: str, body: bytes = b"",
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
        event = proxy_event(routes, method, target, list((headers or {}).items()), body,
                            "127.0.0.1", "localhost")
        failed, answer = invoke(API_FUNCTION, event)
        assert not failed, answer  # an unhandled error would be API Gateway's 502
        text = answer.get("body") or ""
        return answer["statusCode"], answer.get("headers") or {}, json.loads(text) if text \
            else None

    return request


def assert_clear_answer(status: int, body: Any) -> None:
    """Never a 5xx; every error says what was wrong, a 400 with every problem listed."""
    assert status < 500, (status, body)
    assert isinstance(body, dict), body
    if status >= 400:
        assert isinstance(body.get("message"), str) and body["message"].strip(), body
    if status == 400:
        problems = body["problems"]
        assert problems, body
        for problem in problems:
            assert set(problem) == {"pointer", "message"}, problem
            assert problem["pointer"] == "" or problem["pointer"].startswith("/"), problem
            assert problem["message"].strip(), problem
        assert f"({len(problems)} problem(s))" in body["message"], body
