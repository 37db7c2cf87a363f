"""Campaign databases for the tests: a SQLite file, and a fresh schema on a PostgreSQL server.

PostgreSQL tests run whenever the server answers and are skipped, with the reason, when it does
not — unless ``TRAINGRID_REQUIRE_POSTGRES=1`` (CI), where an unreachable server fails them.
The server is ``TRAINGRID_TEST_POSTGRES_URL`` (default: postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from traingrid.db.engine import dispose, engine_for
from traingrid.db.migrate import upgrade

POSTGRES_URL = os.environ.get(
    "TRAINGRID_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Engine]:
    """An engine on the test server, or a skip (a failure where PostgreSQL is required)."""
    engine = create_engine(POSTGRES_URL, poolclass=NullPool, connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            pass
    except Exception as error:  # whatever the reason, the server cannot be used
        reason = (f"PostgreSQL at {make_url(POSTGRES_URL).render_as_string()} is not usable: "
                  f"{type(error).__name__}: {str(error).splitlines()[0]}")
        if os.environ.get("TRAINGRID_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{reason} (TRAINGRID_REQUIRE_POSTGRES=1)", pytrace=False)
        pytest.skip(reason)
    yield engine
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """An empty database: a SQLite file, or a new PostgreSQL schema dropped afterwards."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'campaigns.db'}"
        yield url
        dispose(url)
        return
    server: Engine = request.getfixturevalue("postgres_server")
    schema = f"t_{secrets.token_hex(6)}"
    with server.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    in_schema = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    rendered = in_schema.render_as_string(hide_password=False)
    try:
        yield rendered
    finally:
        dispose(rendered)
        with server.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database migrated once; tests get copies (SQLite DDL syncs the disk each time)."""
    path = tmp_path_factory.mktemp("template") / "campaigns.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    dispose(url)
    return path


@pytest.fixture
def migrated_url(request: pytest.FixtureRequest, database_url: str) -> str:
    """A database at the migrations' head."""
    if database_url.startswith("sqlite:///"):
        template = request.getfixturevalue("sqlite_template")
        shutil.copyfile(template, database_url.removeprefix("sqlite:///"))
    else:
        upgrade(database_url)
    return database_url


@pytest.fixture
def session(migrated_url: str) -> Iterator[Session]:
    """A session on a migrated database; what a test does not commit is rolled back."""
    with Session(engine_for(migrated_url), expire_on_commit=False) as session:
        yield session


@pytest.fixture
def statements(migrated_url: str):
    """``statements()`` counts the SQL statements sent to the test database so far."""
    sent: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        sent.append(statement)

    engine = engine_for(migrated_url)
    event.listen(engine, "before_cursor_execute", count)
    yield lambda: len(sent)
    event.remove(engine, "before_cursor_execute", count)
