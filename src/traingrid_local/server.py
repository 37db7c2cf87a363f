"""The TrainGrid API over HTTP on 127.0.0.1, standing in for API Gateway.

Each request becomes the REST (v1) proxy event API Gateway sends to a Lambda proxy
integration — resource, path parameters, query string, headers, body, request context — and
goes to the API function through ``invoke``; its ``statusCode``, headers and body are the
answer. A function error is a 502, as API Gateway answers it. The routes are the API function's
``Api`` events in ``template.yaml``. Not done here: SigV4 authorisation, throttling, access
logs (see :mod:`traingrid_local.emulator.api_gateway`).
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from traingrid_local.emulator.deploy import TEMPLATE, load_template
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator

API_FUNCTION = "ApiFunction"
STAGE = "v1"
LOCALHOST = "127.0.0.1"
MAX_BODY = 6 * 1024 * 1024  # Lambda's request payload limit
_PARAMETER = re.compile(r"\{([^}/]+)\}")

Invoke = Callable[[dict[str, Any]], dict[str, Any]]
RequestLog = Callable[[str], None]
# The server's own routes (not the API's): (METHOD, path) → JSON body → (status, JSON answer).
LocalRoute = Callable[[Any], tuple[int, Any]]


def api_routes(template_path: Path = TEMPLATE) -> list[tuple[str, str]]:
    """(METHOD, resource path) of every Api event of the API function, as declared."""
    function = load_template(template_path)["Resources"][API_FUNCTION]
    return [(event["Properties"]["Method"].upper(), event["Properties"]["Path"])
            for event in function["Properties"]["Events"].values() if event["Type"] == "Api"]


def _pattern(resource: str) -> re.Pattern[str]:
    """``/runs/{name}`` → a pattern with one named group per path parameter."""
    parts = []
    for segment in resource.strip("/").split("/"):
        parameter = _PARAMETER.fullmatch(segment)
        parts.append(f"(?P<{parameter.group(1)}>[^/]+)" if parameter else re.escape(segment))
    return re.compile("^/" + "/".join(parts) + "$")


def match_route(routes: list[tuple[str, str]], method: str, path: str
                ) -> tuple[str, dict[str, str]] | None:
    """(resource, path parameters) of the route that serves ``method path``, if any."""
    for route_method, resource in routes:
        found = _pattern(resource).match(path)
        if found and route_method == method:
            return resource, found.groupdict()
    return None


def proxy_event(routes: list[tuple[str, str]], method: str, target: str,
                headers: list[tuple[str, str]], body: bytes, source_ip: str,
                host: str) -> dict[str, Any]:
    """The event API Gateway's Lambda proxy integration would send for this request."""
    parts = urlsplit(target)
    path = unquote(parts.path) or "/"
    matched = match_route(routes, method, path)
    resource, path_parameters = matched or (path, {})
    query = parse_qs(parts.query, keep_blank_values=True)
    multi_headers: dict[str, list[str]] = {}
    for name, value in headers:
        multi_headers.setdefault(name, []).append(value)
    try:
        text, encoded = body.decode(), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode(), True
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": {k: v[-1] for k, v in multi_headers.items()} or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": path_parameters or None,
        "stageVariables": None,
        "requestContext": {
            "accountId": ACCOUNT_ID, "apiId": "local", "stage": STAGE,
            "resourcePath": resource, "httpMethod": method, "path": f"/{STAGE}{path}",
            "requestId": str(uuid.uuid4()), "requestTimeEpoch": int(time.time() * 1000),
            "protocol": "HTTP/1.1", "domainName": host,
            "identity": {"sourceIp": source_ip,
                         "userAgent": dict(headers).get("User-Agent", "")},
        },
        "body": text if body else None,
        "isBase64Encoded": encoded,
    }


def lambda_invoker(emulator: Emulator, function_name: str) -> Invoke:
    """Invoke the deployed function through the emulator's Lambda API, as API Gateway does."""
    client = emulator.client("lambda")

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        response = client.invoke(FunctionName=function_name, Payload=json.dumps(event).encode())
        payload = json.loads(response["Payload"].read() or b"null")
        if "FunctionError" in response or not isinstance(payload, dict):
            return {"statusCode": 502, "headers": {"Content-Type": "application/json"},
                    "body": json.dumps({"message": "Internal server error"})}
        return payload

    return invoke


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def _handle(self) -> None:
        started = time.monotonic()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._answer({"statusCode": 413, "body": json.dumps(
                {"message": f"request body over {MAX_BODY} bytes"})})
            return
        body = self.rfile.read(length) if length else b""
        local = self.server.local_routes.get((self.command, urlsplit(self.path).path))
        if local is not None:
            result = _local_answer(local, body)
        else:
            event = proxy_event(self.server.routes, self.command, self.path,
                                list(self.headers.items()), body, self.client_address[0],
                                self.headers.get("Host", ""))
            result = self.server.invoke(event)
        self._answer(result)
        if self.server.request_log is not None:
            self.server.request_log(
                f'{self.command} {self.path} → {result.get("statusCode")} '
                f"({(time.monotonic() - started) * 1000:.0f} ms)")

    def _answer(self, result: dict[str, Any]) -> None:
        body = result.get("body") or ""
        data = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
        self.send_response(int(result.get("statusCode", 502)))
        headers = {k: [v] for k, v in (result.get("headers") or {}).items()}
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers[name] = list(values)
        for name, values in headers.items():
            if name.lower() not in ("content-length", "connection"):
                for value in values:
                    self.send_header(name, str(value))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # one line per request goes to request_log instead


def _local_answer(route: LocalRoute, body: bytes) -> dict[str, Any]:
    try:
        request = json.loads(body) if body else None
    except ValueError as error:
        status, answer = 400, {"message": f"the body is not JSON: {error}"}
    else:
        status, answer = route(request)
    return {"statusCode": status, "headers": {"Content-Type": "application/json"},
            "body": json.dumps(answer)}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    invoke: Invoke
    routes: list[tuple[str, str]]
    local_routes: dict[tuple[str, str], LocalRoute]
    request_log: RequestLog | None


class ApiServer:
    """``with ApiServer(invoke, port=0) as server: ... server.url``: serves until closed."""

    def __init__(self, invoke: Invoke, port: int = 8000,
                 request_log: RequestLog | None = None,
                 routes: list[tuple[str, str]] | None = None,
                 local_routes: dict[tuple[str, str], LocalRoute] | None = None) -> None:
        self._server = _Server((LOCALHOST, port), _Handler)
        self._server.invoke = invoke
        self._server.routes = routes if routes is not None else api_routes()
        self._server.local_routes = local_routes or {}
        self._server.request_log = request_log
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="traingrid-api", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ApiServer:
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
