"""Alembic environment of the campaign database.

``traingrid.db.migrate`` runs it with an open connection in ``config.attributes["connection"]``;
without one it connects to the ``sqlalchemy.url`` option. Offline mode (SQL only) needs that
option too. On SQLite, table changes run in batch mode (copy and rename): SQLite cannot alter
most of a table in place.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from traingrid.db import models
from traingrid.db.engine import engine_for

config = context.config
target_metadata = models.Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database to migrate: set the sqlalchemy.url option")
    return url


def run_offline() -> None:
    url = _url()
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=url.startswith("sqlite"))
    with context.begin_transaction():
        context.run_migrations()


def run_online(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
elif (connection := config.attributes.get("connection")) is not None:
    run_online(connection)
else:
    with engine_for(_url()).begin() as opened:
        run_online(opened)
