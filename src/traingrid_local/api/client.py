"""A client of the TrainGrid API: the local server ``traingrid serve`` starts, or a deployed
stack's API (its ``ApiUrl`` output), with requests signed with SigV4 as its IAM authorisation
requires."""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

DEFAULT_ENDPOINT = "http://127.0.0.1:8000"
# The CLI's endpoint when --endpoint is not given.
ENDPOINT_ENV = "TRAINGRID_ENDPOINT"
# The methods that carry a body: the local servers want it declared JSON on each of them.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The console of a deployed stack (``traingrid console --stack``) wants its token here.
TOKEN_HEADER = "X-TrainGrid-Token"
# API Gateway's answer to a request its stage's throttling refused: the function never saw it,
# so sending it again is safe. Tried again with exponential backoff and full jitter (AWS's
# "Exponential Backoff And Jitter"), so a burst of requests is slowed down, never refused.
THROTTLED = 429
THROTTLE_RETRIES = 10
BACKOFF_BASE_S = 0.1
BACKOFF_CAP_S = 5.0


class ApiError(Exception):
    """The API answered with an error status; ``message`` is its own explanation."""

    def __init__(self, status: int, body: Any) -> None:
        self.status, self.body = status, body
        message = body.get("message") if isinstance(body, dict) else None
        self.message = message or f"HTTP {status}"
        super().__init__(f"{status}: {self.message}")

    @property
    def problems(self) -> list[dict[str, str]]:
        return (self.body.get("problems") or []) if isinstance(self.body, dict) else []


class Unreachable(Exception):
    """Nothing answers at the endpoint."""


class Unsendable(ValueError):
    """HTTP cannot carry the request as given (a header with a line break, a non-ASCII
    header); nothing was sent."""


def segment(value: str) -> str:
    """One path segment, percent-encoded: a name is never read as a path, query or fragment."""
    return quote(value, safe="")


def _check_endpoint(endpoint: str) -> None:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Unreachable(f"{endpoint!r} is not an http(s) URL")


def _check_headers(headers: dict[str, str]) -> None:
    for name, value in headers.items():
        if not value.isascii() or not value.isprintable():
            raise Unsendable(f"the {name} header must be printable ASCII")


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


class Signer:
    """SigV4 for API Gateway (service ``execute-api``) with the default AWS credentials."""

    def __init__(self, region: str, session: Any = None) -> None:
        import boto3

        self.region = region
        self.session = session or boto3.Session(region_name=region)

    def headers(self, method: str, url: str, body: bytes | None,
                headers: dict[str, str]) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = self.session.get_credentials()
        if credentials is None:
            raise Unreachable("no AWS credentials to sign the request with (aws configure, or "
                              "AWS_PROFILE)")
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api",
                  self.region).add_auth(request)
        return dict(request.headers.items())


def stack_outputs(stack: str, region: str, *needed: str) -> tuple[Any, dict[str, str]]:
    """(boto3 session in ``region``, the deployed stack's outputs); Unreachable if the stack
    cannot be read or lacks a ``needed`` output."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    session = boto3.Session(region_name=region)
    try:
        description = session.client("cloudformation").describe_stacks(StackName=stack)
    except (ClientError, BotoCoreError) as error:
        raise Unreachable(f"cannot read stack {stack} in {region}: {error}") from None
    outputs = {o["OutputKey"]: o["OutputValue"]
               for o in description["Stacks"][0].get("Outputs", [])}
    missing = [name for name in needed if name not in outputs]
    if missing:
        raise Unreachable(f"stack {stack} in {region} has no {' or '.join(missing)} output")
    return session, outputs


class ApiClient:
    def __init__(self, endpoint: str = DEFAULT_ENDPOINT, signer: Signer | None = None,
                 timeout: float = 30.0, token: str | None = None) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.signer = signer
        self.timeout = timeout
        self.token = token

    @classmethod
    def for_stack(cls, stack: str, region: str) -> ApiClient:
        """The API of a deployed stack, from its ``ApiUrl`` output."""
        session, outputs = stack_outputs(stack, region, "ApiUrl")
        return cls(outputs["ApiUrl"], Signer(region, session))

    def request(self, method: str, path: str, body: Any = None,
                query: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> Answer:
        """Send one request; return the answer whatever its status, once throttling (429)
        has been retried ``THROTTLE_RETRIES`` times."""
        for attempt in range(THROTTLE_RETRIES):
            answer = self._send(method, path, body, query, headers)
            if answer.status != THROTTLED:
                return answer
            time.sleep(random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** attempt)))
        return self._send(method, path, body, query, headers)

    def _send(self, method: str, path: str, body: Any, query: dict[str, Any] | None,
              headers: dict[str, str] | None) -> Answer:
        _check_endpoint(self.endpoint)
        wanted = {k: v for k, v in (query or {}).items() if v is not None}
        url = self.endpoint + path + (f"?{urlencode(wanted)}" if wanted else "")
        data = None if body is None else (
            body if isinstance(body, bytes) else json.dumps(body).encode())
        sent = {"Accept": "application/json", **(headers or {})}
        if data is not None or method in BODY_METHODS:
            sent.setdefault("Content-Type", "application/json")
        if self.token is not None:
            sent[TOKEN_HEADER] = self.token
        _check_headers(sent)
        if self.signer is not None:
            sent = self.signer.headers(method, url, data, sent)
        request = urllib.request.Request(url, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return Answer(response.status, dict(response.headers), _json(response.read()))
        except urllib.error.HTTPError as error:
            return Answer(error.code, dict(error.headers), _json(error.read()))
        except (TimeoutError, urllib.error.URLError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise Unreachable(f"nothing answers at {self.endpoint} ({reason})") from None
        except http.client.InvalidURL as error:  # e.g. a port out of range
            raise Unreachable(f"{self.endpoint!r} is not a usable URL: {error}") from None

    def call(self, method: str, path: str, body: Any = None,
             query: dict[str, Any] | None = None,
             headers: dict[str, str] | None = None) -> Answer:
        """Like ``request``, but an error status raises ApiError."""
        answer = self.request(method, path, body, query, headers)
        if answer.status >= 400:
            raise ApiError(answer.status, answer.body)
        return answer

    def get(self, path: str, **query: Any) -> Any:
        return self.call("GET", path, query=query).body


def _json(data: bytes) -> Any:
    try:
        return json.loads(data) if data else None
    except ValueError:
        return data.decode("utf-8", "replace")
