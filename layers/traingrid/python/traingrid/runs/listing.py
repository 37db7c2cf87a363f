"""Recent runs of both pipelines, newest first, one page at a time.

Step Functions lists each state machine's executions newest first, page by page. A page of
runs merges the heads of those lists; its cursor remembers, for each state machine, the page
it was reading and how many of its executions were shown, so the next page goes on exactly
where this one stopped. The cursor is opaque to clients (URL-safe base64 of JSON).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from traingrid.errors import RequestInvalid

# (state machine key, page token or None) → (executions newest first, next page token)
FetchPage = Callable[[str, str | None, int], tuple[list[dict[str, Any]], str | None]]


@dataclass
class _Source:
    key: str
    token: str | None  # the token of the page being read (None: the first page)
    items: list[dict[str, Any]]
    index: int  # how many of the page's items have been taken
    next_token: str | None

    @property
    def head(self) -> dict[str, Any] | None:
        return self.items[self.index] if self.index < len(self.items) else None

    @property
    def position(self) -> list[Any] | None:
        """Where to go on from, or None when this source is exhausted."""
        if self.head is None and self.next_token is None:
            return None
        if self.head is None:
            return [self.next_token, 0]
        return [self.token, self.index]


def encode_cursor(size: int, positions: dict[str, list[Any] | None]) -> str | None:
    if all(p is None for p in positions.values()):
        return None
    text = json.dumps({"size": size, "at": positions}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, dict[str, list[Any] | None]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return int(data["size"]), dict(data["at"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise RequestInvalid([{"pointer": "/next_token",
                               "message": "is not a token this API returned"}],
                             "query") from None


def newest_first(fetch: FetchPage, keys: list[str], limit: int,
                 cursor: str | None = None) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
    """Up to ``limit`` executions of the state machines ``keys``, newest first, as
    ``(key, execution)``; and the cursor of the next page (None after the last one)."""
    positions: dict[str, list[Any] | None]
    if cursor is None:
        size, positions = limit, {key: [None, 0] for key in keys}
    else:
        size, positions = decode_cursor(cursor)
    sources = []
    for key in keys:
        position = positions.get(key)
        if position is None:
            continue
        items, next_token = fetch(key, position[0], size)
        sources.append(_Source(key, position[0], items, int(position[1]), next_token))
    taken: list[tuple[str, dict[str, Any]]] = []
    while len(taken) < limit:
        live = [s for s in sources if s.head is not None]
        if not live:
            break
        newest = max(live, key=lambda s: s.head["startDate"])  # type: ignore[index]
        taken.append((newest.key, newest.head))  # type: ignore[arg-type]
        newest.index += 1
        if newest.head is None and newest.next_token is not None:
            newest.token = newest.next_token
            newest.items, newest.next_token = fetch(newest.key, newest.token, size)
            newest.index = 0
    after = {key: None for key in keys} | {s.key: s.position for s in sources}
    return taken, encode_cursor(size, after)
