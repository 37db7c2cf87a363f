"""What ``traingrid serve`` answers under ``/console``: the page, its script and style, its
settings, and each pipeline's graph drawn from the deployed state machine's definition.

Run data never comes from here: the page reads the TrainGrid API like any other client.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from traingrid.runs.view import CAMPAIGN_FANOUT, TRAINING_RUN
from traingrid_local.console.graph import svg

PREFIX = "/console"
STATIC = Path(__file__).parent / "static"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
PIPELINES = (TRAINING_RUN, CAMPAIGN_FANOUT)
# The page runs only what this server sends: no inline script, nothing from elsewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}

Definition = Callable[[str], dict[str, Any]]  # pipeline → its deployed ASL definition
Answer = dict[str, Any]  # as a Lambda proxy integration answers: statusCode, headers, body


def _answer(status: int, content_type: str, body: str) -> Answer:
    return {"statusCode": status, "headers": {"Content-Type": content_type, **SECURITY_HEADERS},
            "body": body}


def _not_found(path: str) -> Answer:
    return _answer(404, "application/json",
                   json.dumps({"message": f"{path} is not a page of the console; see {PREFIX}"}))


class Console:
    """``answer(method, path)`` for every path under ``/console``; None for other paths."""

    def __init__(self, definition: Definition, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.graph = cache(lambda pipeline: svg(definition(pipeline), f"{pipeline} graph"))

    def answer(self, method: str, path: str) -> Answer | None:
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            return None
        if method not in ("GET", "HEAD"):
            return {**_answer(405, "application/json", json.dumps(
                {"message": f"{method} is not a method of {path}; it allows GET, HEAD"})),
                "headers": {"Content-Type": "application/json", "Allow": "GET, HEAD"}}
        page = path.removeprefix(PREFIX).strip("/")
        if page in ("", "index.html"):
            return self._file("index.html")
        if page == "config.json":
            return _answer(200, "application/json", json.dumps(self.settings))
        if page.startswith("static/"):
            return self._file(page.removeprefix("static/"))
        if page.startswith("graphs/") and page.endswith(".svg"):
            pipeline = page.removeprefix("graphs/").removesuffix(".svg")
            if pipeline in PIPELINES:
                return _answer(200, CONTENT_TYPES[".svg"], self.graph(pipeline))
        return _not_found(path)

    def _file(self, name: str) -> Answer:
        if name not in _static_files():
            return _not_found(f"{PREFIX}/static/{name}")
        found = STATIC / name
        return _answer(200, CONTENT_TYPES.get(found.suffix, "application/octet-stream"),
                       found.read_text())


def _static_files() -> frozenset[str]:
    """The names the console serves: what ``static/`` holds, looked up, never a path built
    from a request (a name too long for the file system would fail naming this install)."""
    return frozenset(path.name for path in STATIC.iterdir()
                     if path.is_file() and not path.name.startswith("."))
