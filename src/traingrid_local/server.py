"""The TrainGrid API over HTTP on 127.0.0.1, standing in for API Gateway.

Each request becomes the REST (v1) proxy event API Gateway sends to a Lambda proxy
integration — resource, path parameters, query string, headers, body, request context — and
goes to the API function through ``invoke``; its ``statusCode``, headers and body are the
answer. A function error is a 502, as API Gateway answers it. The routes are the API function's
``Api`` events in ``template.yaml``; a method a route does not declare is a 405 with ``Allow``,
in JSON like every other error. Not done here: SigV4 authorisation, throttling, access
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
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from werkzeug.datastructures import Headers
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

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
# The server's own pages: (METHOD, path) → an answer shaped as the API function's, or None
# for a path that is not theirs.
Pages = Callable[[str, str], dict[str, Any] | None]


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


def allowed_methods(routes: list[tuple[str, str]], path: str) -> list[str]:
    """The methods the API declares for ``path`` (with HEAD wherever GET is)."""
    methods = {method for method, resource in routes if _pattern(resource).match(path)}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def _json_answer(status: int, body: Any, headers: dict[str, str] | None = None
                 ) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"Content-Type": "application/json"} | (
        headers or {}), "body": json.dumps(body)}


def _local_answer(route: LocalRoute, body: bytes) -> dict[str, Any]:
    try:
        request = json.loads(body) if body else None
    except ValueError as error:
        return _json_answer(400, {"message": f"the body is not JSON: {error}"})
    return _json_answer(*route(request))


class _Api:
    """The WSGI application: local routes, undeclared methods (405), then the API function."""

    def __init__(self, invoke: Invoke, routes: list[tuple[str, str]],
                 local_routes: dict[tuple[str, str], LocalRoute],
                 request_log: RequestLog | None, pages: Pages | None = None) -> None:
        self.invoke, self.routes = invoke, routes
        self.local_routes, self.request_log, self.pages = local_routes, request_log, pages

    def answer(self, request: Request) -> dict[str, Any]:
        if (request.content_length or 0) > MAX_BODY:
            return _json_answer(413, {"message": f"request body over {MAX_BODY} bytes"})
        body = request.get_data(cache=False)
        # The request target as sent (Werkzeug's own path is decoded already).
        target = request.environ.get("RAW_URI") or request.full_path
        path = unquote(urlsplit(target).path) or "/"
        local = self.local_routes.get((request.method, path))
        if local is not None:
            return _local_answer(local, body)
        page = self.pages(request.method, path) if self.pages else None
        if page is not None:
            return page
        method = "GET" if request.method == "HEAD" else request.method
        allowed = allowed_methods(self.routes, path)
        if allowed and method not in allowed:
            return _json_answer(405, {"message": f"{request.method} is not a method of {path}; "
                                                 f"it allows {', '.join(allowed)}"},
                                {"Allow": ", ".join(allowed)})
        event = proxy_event(self.routes, method, target, list(request.headers.items()), body,
                            request.remote_addr or "", request.host)
        return self.invoke(event)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        started = time.monotonic()
        request = Request(environ)
        result = self.answer(request)
        body = result.get("body") or ""
        data = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
        headers = Headers()
        for name, value in (result.get("headers") or {}).items():
            headers[name] = str(value)
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers.setlist(name, [str(v) for v in values])
        for hop in ("Content-Length", "Connection", "Transfer-Encoding"):
            headers.pop(hop, None)
        response = Response(data, status=int(result.get("statusCode", 502)), headers=headers)
        if self.request_log is not None:
            self.request_log(f"{request.method} {request.environ.get('RAW_URI', request.path)} → "
                             f"{response.status_code} "
                             f"({(time.monotonic() - started) * 1000:.0f} ms)")
        return response(environ, start_response)


class ApiServer:
    """``with ApiServer(invoke, port=0) as server: ... server.url``: serves until closed.

    Werkzeug's threaded WSGI server: a thread per connection, HTTP/1.1 keep-alive, HEAD
    answered without a body."""

    def __init__(self, invoke: Invoke, port: int = 8000,
                 request_log: RequestLog | None = None,
                 routes: list[tuple[str, str]] | None = None,
                 local_routes: dict[tuple[str, str], LocalRoute] | None = None,
                 pages: Pages | None = None) -> None:
        app = _Api(invoke, routes if routes is not None else api_routes(), local_routes or {},
                   request_log, pages)
        self._server = make_server(LOCALHOST, port, app, threaded=True,
                                   request_handler=_QuietHandler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="traingrid-api", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{LOCALHOST}:{self._server.server_port}"

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


class _QuietHandler(WSGIRequestHandler):
    """HTTP/1.1 (keep-alive); one line per request goes to ``request_log`` instead."""

    protocol_version = "HTTP/1.1"

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass
