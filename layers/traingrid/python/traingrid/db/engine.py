"""Engines and the transaction boundary of the campaign database.

One engine per URL per process: a Lambda reuses it (and its few pooled connections) across
invocations. ``transaction`` is the only place that commits; repositories never do.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def _enforce_foreign_keys(dbapi_connection: Any, _record: Any) -> None:
    # SQLite checks foreign keys only when each connection asks for it.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _create(url: str) -> Engine:
    if make_url(url).get_backend_name() == "sqlite":
        engine = create_engine(url)
        event.listen(engine, "connect", _enforce_foreign_keys)
        return engine
    # A Lambda handles one request at a time: a tiny pool, checked before use because the
    # execution environment may have been frozen for longer than the server keeps connections.
    return create_engine(url, pool_pre_ping=True, pool_size=1, max_overflow=2)


def engine_for(url: str) -> Engine:
    """The process's engine for ``url``, created on first use."""
    with _lock:
        if url not in _engines:
            _engines[url] = _create(url)
        return _engines[url]


def dispose(url: str) -> None:
    """Close the pooled connections of ``url``'s engine and forget it (e.g. before dropping
    its database)."""
    with _lock:
        engine = _engines.pop(url, None)
    if engine is not None:
        engine.dispose()


@contextmanager
def transaction(url: str) -> Iterator[Session]:
    """A session in one transaction: committed if the block succeeds, rolled back if it raises.

    Objects stay readable after the commit (no expiry), so a handler can return what it wrote.
    """
    with Session(engine_for(url), expire_on_commit=False) as session, session.begin():
        yield session
