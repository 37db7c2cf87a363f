"""Recent runs of both pipelines, newest first, one page at a time.

Step Functions lists each state machine's executions newest first, page by page. A page of
runs merges the heads of those lists; its cursor remembers, for each state machine, the page
it was reading and how many of its executions were shown, so the next page goes on exactly
where this one stopped. The cursor is opaque to clients (``traingrid.opaque``), and carries
the filters it was issued for: a cursor sent with other filters, or that no page issued, is
refused (``/next_token``) instead of reaching Step Functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from traingrid import opaque
from traingrid.errors import RequestInvalid

# The most a cursor inflates to: a page token of each state machine's, and the filters.
CURSOR_BYTES = 64 * 1024
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


def invalid_cursor(why: str) -> RequestInvalid:
    return RequestInvalid([{"pointer": "/next_token", "message": why}], "query")


def encode_cursor(size: int, positions: dict[str, list[Any] | None],
                  filters: dict[str, str | None]) -> str | None:
    if all(p is None for p in positions.values()):
        return None
    return opaque.encode({"size": size, "at": positions, "filters": filters})


def decode_cursor(cursor: str, keys: list[str], filters: dict[str, str | None]
                  ) -> tuple[int, dict[str, list[Any] | None]]:
    """The page size and positions of a cursor issued for ``filters`` over ``keys``."""
    try:
        data = opaque.decode(cursor, CURSOR_BYTES)
        size, positions, issued_for = int(data["size"]), dict(data["at"]), data["filters"]
        valid = (1 <= size <= 1000 and set(positions) <= set(keys)
                 and isinstance(issued_for, dict) and all(
            p is None or (isinstance(p, list) and len(p) == 2
                          and (p[0] is None or isinstance(p[0], str))
                          and isinstance(p[1], int) and p[1] >= 0)
            for p in positions.values()))
    except (ValueError, KeyError, TypeError, AttributeError):
        valid, issued_for = False, None
    if not valid:
        raise invalid_cursor("is not a token this API returned")
    if issued_for != filters:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(issued_for.items()) if v) or "none"
        raise invalid_cursor(f"was returned for other filters ({shown}): send the same "
                             "filters with it, or leave it out to start again")
    return size, positions


def newest_first(fetch: FetchPage, keys: list[str], limit: int, cursor: str | None = None,
                 filters: dict[str, str | None] | None = None
                 ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
    """Up to ``limit`` executions of the state machines ``keys``, newest first, as
    ``(key, execution)``; and the cursor of the next page (None after the last one).
    ``filters`` are those the caller applies (the cursor is valid with them only)."""
    filters = filters or {}
    positions: dict[str, list[Any] | None]
    if cursor is None:
        size, positions = limit, {key: [None, 0] for key in keys}
    else:
        size, positions = decode_cursor(cursor, keys, filters)
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
    return taken, encode_cursor(size, after, filters)
