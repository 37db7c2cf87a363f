"""Schema migrations of the campaign database, run from code (no alembic.ini).

The migrations live in ``schema/migrations`` of the source tree. The deployed migration
function ships that folder beside its handler and passes it in (or ``TRAINGRID_MIGRATIONS``
names it). This is the only
module that imports Alembic, so nothing else pays for it at import time.
"""

from __future__ import annotations

import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from traingrid.db.engine import engine_for


def migrations_folder() -> Path:
    """``TRAINGRID_MIGRATIONS`` if set, else ``schema/migrations`` of the source tree."""
    configured = os.environ.get("TRAINGRID_MIGRATIONS")
    if configured:
        return Path(configured)
    # This file is layers/traingrid/python/traingrid/db/migrate.py in the source tree.
    here = Path(__file__).resolve()
    source = here.parents[5] / "schema" / "migrations" if len(here.parents) > 5 else None
    if source is None or not source.is_dir():
        raise FileNotFoundError(f"{here} is not in the source tree: set TRAINGRID_MIGRATIONS to "
                                "the deployed schema/migrations folder")
    return source


def _run(url: str, operation: str, revision: str, folder: Path | None) -> None:
    config = Config()
    # Config options go through ConfigParser interpolation: a literal '%' must be doubled.
    location = str(folder or migrations_folder())
    config.set_main_option("script_location", location.replace("%", "%%"))
    with engine_for(url).begin() as connection:
        config.attributes["connection"] = connection
        getattr(command, operation)(config, revision)


def upgrade(url: str, revision: str = "head", folder: Path | None = None) -> None:
    """Migrate the database at ``url`` up to ``revision``, in one transaction where the
    backend allows it (PostgreSQL)."""
    _run(url, "upgrade", revision, folder)


def downgrade(url: str, revision: str, folder: Path | None = None) -> None:
    """Migrate down to ``revision`` (``"base"``: drop everything)."""
    _run(url, "downgrade", revision, folder)


def current(url: str) -> str | None:
    """The database's revision; None before the first migration."""
    with engine_for(url).connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
