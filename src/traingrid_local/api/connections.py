"""How the local servers (``traingrid serve``, ``traingrid console --stack``) hold their
connections: HTTP/1.1, one request a connection (Werkzeug closes it after each answer), a
connection closed once idle ``IDLE_TIMEOUT_S`` before its request is whole (each holds a
thread), what the HTTP layer refuses before a request reaches the API — a request line over
64 KiB (414), a header line over 64 KiB or over 100 headers (431), HTTP/2 or later (505), a
malformed request line (400) — answered in the API's JSON error shape, and every log line with
its control characters escaped (a request line is whatever the client sent).
"""

from __future__ import annotations

import json
from typing import Any

from werkzeug.serving import WSGIRequestHandler

# A connection that sends nothing for this long is closed: each open one holds a thread of the
# server's, and a client that connects and waits would hold it for ever.
IDLE_TIMEOUT_S = 60.0
# C0, DEL and C1 controls as \xNN, and the backslash doubled so an escape cannot be forged.
_CONTROLS = str.maketrans({**{c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))},
                           ord("\\"): "\\\\"})
# The HTTP layer's detail of a refusal can quote the request line: it is cut to this.
MAX_DETAIL = 200


def escaped(line: str) -> str:
    """``line`` as a log may show it: no control character reaches the terminal."""
    return line.translate(_CONTROLS)


class ConnectionHandler(WSGIRequestHandler):
    """One connection of a local server; its requests go to the WSGI application, a line each
    to the server's request log (not here)."""

    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S  # socketserver sets it on the connection: every read and write

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log_error(self, format: str, *args: Any) -> None:
        # A connection idle past its timeout is closed as meant: nothing to report.
        if not format.startswith("Request timed out"):
            super().log_error(format, *args)

    def log(self, type: str, message: str, *args: Any) -> None:
        super().log(type, "%s", escaped(message % args if args else message))

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None) -> None:
        """A refusal of the HTTP layer as the API answers errors: ``{"message"}`` in JSON, with
        a status line whatever version the client named, and the connection closed."""
        phrase, meaning = self.responses.get(code, ("Error", ""))
        detail = message if message and message != phrase else (explain or meaning)
        self.log_error("code %d, message %s", code, detail)
        body = json.dumps({"message": f"{phrase}: {detail[:MAX_DETAIL]}"}).encode()
        if self.request_version not in ("HTTP/1.0", "HTTP/1.1"):
            self.request_version = "HTTP/1.1"  # else an HTTP/0.9 answer: no status, no headers
        self.close_connection = True
        self.send_response(code, phrase)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def with_idle_timeout(seconds: float) -> type[ConnectionHandler]:
    """The handler class of a server whose connections close after ``seconds`` idle."""
    if seconds == IDLE_TIMEOUT_S:
        return ConnectionHandler
    return type("ConnectionHandler", (ConnectionHandler,), {"timeout": seconds})
