"""The TrainGrid API over HTTP on 127.0.0.1, standing in for API Gateway.

Each request becomes the REST (v1) proxy event API Gateway sends to a Lambda proxy
integration — resource, path parameters, query string, headers, body, request context — and
goes to the API function through ``invoke``; its ``statusCode``, headers and body are the
answer. A function error is a 502, as API Gateway answers it. The routes are the API function's
``Api`` events in ``template.yaml``; a method a route does not declare is a 405 with ``Allow``,
in JSON like every other error, a failure's and the HTTP layer's own (414, 431, 505) too. A
body is read up to Lambda's 6 MB however it is framed (a 413 past it, a 400 for broken chunked
framing). Given a ``throttle``, the stage's token bucket (:mod:`traingrid_local.api.throttle`),
a request it refuses is API Gateway's 429. Not done here: SigV4 authorisation, access logs
(see :mod:`traingrid_local.emulator.api_gateway`).

A server on 127.0.0.1 is still reachable from any page the user's browser opens, so before
anything else each request must name this server as its ``Host`` (no DNS rebinding), carry no
``Origin`` but the server's own (none at all: a client that is not a browser), and send its
body as ``application/json`` (no form or ``text/plain`` request, the kinds a page elsewhere can
send without asking). A server given a ``token`` (``traingrid console --stack``, which signs
with the user's credentials) also wants that token on every request, and one given
``declared_only`` sends on only the routes of ``schema/openapi.yaml``.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, unquote_plus, urlencode, urlsplit

import yaml
from werkzeug.datastructures import Headers
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from traingrid_local.api.bodies import (
    LimitedRequest,
    Settings,
    invalid,
    json_answer,
    read_body,
    settings_of,
)
from traingrid_local.api.client import BODY_METHODS, TOKEN_HEADER
from traingrid_local.api.connections import IDLE_TIMEOUT_S, escaped, with_idle_timeout
from traingrid_local.api.throttle import THROTTLED_BODY, TOO_MANY_REQUESTS, TokenBucket
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator
from traingrid_local.templates import PROJECT_ROOT, TEMPLATE, load_template

logger = logging.getLogger(__name__)

API_FUNCTION = "ApiFunction"
STAGE = "v1"
LOCALHOST = "127.0.0.1"
_PARAMETER = re.compile(r"\{([^}/]+)\}")
OPENAPI = PROJECT_ROOT / "schema" / "openapi.yaml"
# The names the user's browser may give this server; any other Host is DNS rebinding.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
JSON_TYPE = "application/json"
TOKEN_QUERY = "token"
# A browser marks each request with where it comes from (Fetch Metadata): "same-origin" from
# the console's own pages, "none" from the address bar or a bookmark. A page on another port
# of 127.0.0.1 is "same-site" (a site ignores ports), so its <img> or link would carry the
# cookie: the cookie is honoured only from these.
SESSION_FETCH_SITES = ("same-origin", "none")
# Dots or slashes hidden by percent-encoding, or a backslash some clients read as a slash.
_HIDDEN_SEPARATOR = re.compile(r"%2e|%2f|%5c|\\", re.IGNORECASE)

Invoke = Callable[[dict[str, Any]], dict[str, Any]]
RequestLog = Callable[[str], None]
# The server's own routes (not the API's): (METHOD, path) → their settings (None for no body;
# any other shape is the server's 400) → (status, JSON answer).
LocalRoute = Callable[[Settings | None], tuple[int, Any]]
# The server's own pages: (METHOD, path) → an answer shaped as the API function's, or None
# for a path that is not theirs.
Pages = Callable[[str, str], dict[str, Any] | None]


def api_routes(template_path: Path = TEMPLATE) -> list[tuple[str, str]]:
    """(METHOD, resource path) of every Api event of the API function, as declared."""
    function = load_template(template_path)["Resources"][API_FUNCTION]
    return [(event["Properties"]["Method"].upper(), event["Properties"]["Path"])
            for event in function["Properties"]["Events"].values() if event["Type"] == "Api"]


def openapi_routes(document: Path = OPENAPI) -> list[tuple[str, str]]:
    """(METHOD, path template) of every operation ``schema/openapi.yaml`` declares."""
    paths = yaml.safe_load(document.read_text())["paths"]
    return [(method.upper(), path) for path, operations in paths.items()
            for method in operations if method in ("get", "put", "post", "delete", "patch")]


def own_hosts(port: int) -> frozenset[str]:
    """The ``Host`` values that name the server on 127.0.0.1:``port``."""
    hosts = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    return frozenset(hosts | (set(LOOPBACK_NAMES) if port == 80 else set()))


def path_problem(raw_path: str) -> str | None:
    """Why a request path (as sent, still percent-encoded) is not one to send on: a ``.`` or
    ``..`` segment, an empty one, or a dot, slash or backslash hidden by encoding."""
    if _HIDDEN_SEPARATOR.search(raw_path):
        return "it hides a dot, a slash or a backslash (%2e, %2f, %5c or \\)"
    segments = raw_path.split("/")[1:]
    if not raw_path.startswith("/"):
        return "it does not start with '/'"
    if any(segment in (".", "..") for segment in segments):
        return "it has a '.' or '..' segment"
    if any(segment == "" for segment in segments[:-1]):
        return "it has an empty segment ('//')"
    if any(not character.isprintable() for character in unquote(raw_path)):
        return "it has a control character"
    return None


def redacted(target: str, secret: str | None = None) -> str:
    """``target`` as the log may show it: the value of every query parameter whose name,
    decoded (``%74oken``, ``tok%65n``, ``+token``), is ``token`` in any case replaced by
    ``…``, and ``secret`` wherever else it appears."""
    path, question, rest = target.partition("?")
    query, hash_mark, fragment = rest.partition("#")
    parts = []
    for part in query.split("&") if question else ():
        name, equals, _ = part.partition("=")
        hidden = unquote_plus(name).strip().casefold() == TOKEN_QUERY
        parts.append(f"{name}{equals}…" if hidden else part)
    line = path + question + "&".join(parts) + hash_mark + fragment
    return line.replace(secret, "…") if secret else line


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


def split_target(target: str) -> tuple[str, str]:
    """(path, query) of a request target as sent, still percent-encoded: its origin form
    (``/runs?limit=2``; ``//runs`` is a path here, not a host) or its absolute form."""
    if not target.startswith("/"):
        parts = urlsplit(target)
        return parts.path, parts.query
    path, _, query = target.partition("#")[0].partition("?")
    return path, query


def _target(request: Request) -> str:
    """The request target as sent (Werkzeug's own path is decoded already)."""
    return str(request.environ.get("RAW_URI") or request.full_path)


def proxy_event(routes: list[tuple[str, str]], method: str, target: str,
                headers: list[tuple[str, str]], body: bytes, source_ip: str,
                host: str) -> dict[str, Any]:
    """The event API Gateway's Lambda proxy integration would send for this request."""
    raw_path, raw_query = split_target(target)
    path = unquote(raw_path) or "/"
    matched = match_route(routes, method, path)
    resource, path_parameters = matched or (path, {})
    query = parse_qs(raw_query, keep_blank_values=True)
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


def _not_json(request: Request) -> dict[str, Any] | None:
    """A 415 for a method with a body whose body is not declared JSON (a form or a
    ``text/plain`` request is one a page elsewhere may send without asking first); a 400 when
    no body and no type came at all."""
    if request.method not in BODY_METHODS or request.mimetype == JSON_TYPE:
        return None
    sent = request.headers.get("Content-Type")
    hint = f"with curl: -H 'Content-Type: {JSON_TYPE}' -d '{{...}}'"
    if sent is None and not request.content_length and "chunked" not in request.headers.get(
            "Transfer-Encoding", ""):
        # Nothing sent at all: the body the document requires is missing.
        message = f"{request.method} needs a JSON body, sent with Content-Type: {JSON_TYPE}"
        return invalid(message, f"{message}; {hint}")
    return json_answer(415, {"message": f"{request.method} needs Content-Type: {JSON_TYPE} "
                                        f"({'got ' + repr(sent) if sent else 'none sent'}); "
                                        f"{hint}"})


class _Api:
    """The WSGI application: who may ask (Host, Origin, token), local routes, pages,
    undeclared routes (404, 405), bodies that are not JSON (415), then the API function."""

    def __init__(self, invoke: Invoke, routes: list[tuple[str, str]],
                 local_routes: dict[tuple[str, str], LocalRoute],
                 request_log: RequestLog | None, pages: Pages | None = None,
                 token: str | None = None, declared_only: bool = False,
                 throttle: TokenBucket | None = None) -> None:
        self.invoke, self.routes, self.throttle = invoke, routes, throttle
        self.local_routes, self.request_log, self.pages = local_routes, request_log, pages
        self.token, self.declared_only = token, declared_only
        self.port = 0  # set once the socket is bound

    def answer(self, request: Request) -> dict[str, Any]:
        refused = self.stranger(request) or (self.session(request) if self.token else None)
        if refused is not None:
            return refused
        body, unreadable = read_body(request)
        if unreadable is not None:
            return unreadable
        target = _target(request)
        raw_path = split_target(target)[0]
        path = unquote(raw_path) or "/"
        if self.declared_only and (problem := path_problem(raw_path)):
            return json_answer(400, {"message": f"{raw_path} is not a path to send on: "
                                                f"{problem}"})
        local = self.local_routes.get((request.method, path))
        if local is not None:
            settings, refused = settings_of(body)
            return _not_json(request) or refused or json_answer(*local(settings))
        page = self.pages(request.method, path) if self.pages else None
        if page is not None:
            return page
        method = "GET" if request.method == "HEAD" else request.method
        allowed = allowed_methods(self.routes, path)
        if self.declared_only and not allowed:
            declared = ", ".join(sorted({resource for _, resource in self.routes}))
            return json_answer(404, {"message": f"{path} is not a path of the API; it has "
                                                f"{declared}"})
        if allowed and method not in allowed:
            return json_answer(405, {"message": f"{request.method} is not a method of {path}; "
                                                f"it allows {', '.join(allowed)}"},
                               {"Allow": ", ".join(allowed)})
        refused = _not_json(request)
        if refused is not None:
            return refused
        if self.throttle is not None and not self.throttle.admit():
            return json_answer(TOO_MANY_REQUESTS, THROTTLED_BODY)
        event = proxy_event(self.routes, method, target, list(request.headers.items()), body,
                            request.remote_addr or "", request.host)
        return self.invoke(event)

    def stranger(self, request: Request) -> dict[str, Any] | None:
        """A 403 for a request that names another host or comes from another origin's page."""
        hosts = own_hosts(self.port)
        host = request.environ.get("HTTP_HOST", "").lower()
        if host not in hosts:
            return json_answer(403, {"message": f"Host {host or '(none)'!r} is not this server; "
                                                f"it answers as {', '.join(sorted(hosts))}"})
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() not in {f"http://{h}" for h in hosts}:
            return json_answer(403, {"message": f"Origin {origin!r} is not this server: a page "
                                                f"elsewhere may not call it"})
        return None

    def session(self, request: Request) -> dict[str, Any] | None:
        """With a token: the printed URL's ``?token=`` traded for a cookie (and a redirect to
        the clean URL), or a 403 for a request that does not carry the token."""
        cookie = f"traingrid-console-{self.port}"
        offered = request.args.get(TOKEN_QUERY)
        if offered is not None and request.method in ("GET", "HEAD"):
            if not self.is_token(offered):
                return json_answer(403, {"message": "the token in the URL is not this "
                                                    "server's: open the URL it printed at start"})
            # One leading slash: '//host' (or a backslash for one) would send the browser away.
            location = "/" + split_target(_target(request))[0].lstrip("/\\")
            rest = [(k, v) for k, v in request.args.items(multi=True) if k != TOKEN_QUERY]
            location += f"?{urlencode(rest)}" if rest else ""
            return json_answer(303, {"message": f"signed in; go on to {location}"}, {
                "Location": location, "Cache-Control": "no-store",
                "Referrer-Policy": "no-referrer",
                "Set-Cookie": f"{cookie}={self.token}; HttpOnly; SameSite=Strict; Path=/"})
        scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
        presented = (request.headers.get(TOKEN_HEADER)
                     or (credentials.strip() if scheme.lower() == "token" else None))
        if not presented and request.cookies.get(cookie):
            site = request.headers.get("Sec-Fetch-Site", "").lower()
            if site not in SESSION_FETCH_SITES:
                return json_answer(403, {"message": (
                    f"the session cookie is honoured only on requests from this console's own "
                    f"pages (the browser says Sec-Fetch-Site: {site or '(nothing)'}): a page "
                    f"on another port of 127.0.0.1 shares its cookies; open the URL it "
                    f"printed at start, or send the token in an {TOKEN_HEADER} header")})
            presented = request.cookies.get(cookie)
        if not presented:
            return json_answer(403, {"message": "this server wants its token: open the URL it "
                                                "printed at start (…?token=…), or send the "
                                                f"token in an {TOKEN_HEADER} header"})
        if not self.is_token(presented):
            return json_answer(403, {"message": "the token is not this server's: open the URL "
                                                "it printed at start"})
        return None

    def is_token(self, offered: str) -> bool:
        return self.token is not None and hmac.compare_digest(offered.encode(),
                                                              self.token.encode())

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        started = time.monotonic()
        request = LimitedRequest(environ)
        try:
            result = self.answer(request)
        except Exception as error:  # every answer is JSON, a failure's too
            logger.exception("request failed")
            # The type only: an error's text can name this machine's paths.
            result = json_answer(500, {"message": f"the local server could not answer "
                                                  f"({type(error).__name__}); its log has "
                                                  "the details"})
        body = result.get("body") or ""
        data = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
        headers = Headers()
        for name, value in (result.get("headers") or {}).items():
            headers[name] = str(value)
        for name, values in (result.get("multiValueHeaders") or {}).items():
            headers.setlist(name, [str(v) for v in values])
        for hop in ("Content-Length", "Connection", "Transfer-Encoding"):
            headers.pop(hop, None)
        # No page elsewhere may read an answer, whatever the function behind says.
        for name in {name for name, _ in headers.items()
                     if name.lower().startswith("access-control-")}:
            del headers[name]
        response = Response(data, status=int(result.get("statusCode", 502)), headers=headers)
        if self.request_log is not None:
            logged = redacted(_target(request), self.token)
            self.request_log(escaped(f"{request.method} {logged} → {response.status_code} "
                                     f"({(time.monotonic() - started) * 1000:.0f} ms)"))
        return response(environ, start_response)


class ApiServer:
    """``with ApiServer(invoke, port=0) as server: ... server.url``: serves until closed.

    Werkzeug's threaded WSGI server: a thread per connection, one request each, closed when
    idle ``idle_timeout_s`` (:mod:`traingrid_local.api.connections`), HEAD answered without a
    body. ``token=True`` makes a secret for this server's life that every
    request must carry (``url_with_token`` is the URL to open); ``declared_only`` sends on only
    ``routes``, each path checked first (:func:`path_problem`)."""

    def __init__(self, invoke: Invoke, port: int = 8000,
                 request_log: RequestLog | None = None,
                 routes: list[tuple[str, str]] | None = None,
                 local_routes: dict[tuple[str, str], LocalRoute] | None = None,
                 pages: Pages | None = None, token: bool = False,
                 declared_only: bool = False, throttle: TokenBucket | None = None,
                 idle_timeout_s: float = IDLE_TIMEOUT_S) -> None:
        self.token = secrets.token_urlsafe(32) if token else None
        self._app = _Api(invoke, routes if routes is not None else api_routes(),
                         local_routes or {}, request_log, pages, self.token, declared_only,
                         throttle)
        # Threaded: werkzeug's ThreadedWSGIServer, whose request threads are daemons, so a
        # request still being answered does not hold up the process's exit.
        self._server = make_server(LOCALHOST, port, self._app, threaded=True,
                                   request_handler=with_idle_timeout(idle_timeout_s))
        self._app.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="traingrid-api", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{LOCALHOST}:{self._server.server_port}"

    def url_with_token(self, path: str = "/") -> str:
        """The URL of ``path`` that signs a browser in (the token traded for a cookie)."""
        return self.url + path + (f"?{TOKEN_QUERY}={self.token}" if self.token else "")

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

