"""The functions sign in as a role of their own: after the migration (as the owner) it can read
and write what the runtime does, on a real PostgreSQL server, and can change no schema, delete
no row and touch no migration record."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.pool import NullPool

from tests.db import seed
from tests.db.conftest import POSTGRES_URL
from tests.db.test_training_runs import outcome
from traingrid.db import custom_resource
from traingrid.db.engine import dispose, transaction
from traingrid.db.migrate import migrations_folder
from traingrid.db.repositories import RegionRepository, RunRepository, TrainingRunRepository
from traingrid.db.roles import RoleInvalid, grant_runtime_access, scram_verifier

T0 = datetime(2026, 11, 25, 6, 0, tzinfo=UTC)


@pytest.fixture
def owner_and_app(postgres_server: Engine) -> Iterator[tuple[str, str, str]]:
    """A fresh schema migrated by the owner, and the functions' role granted on it."""
    schema, role = f"t_{secrets.token_hex(6)}", f"tg_app_{secrets.token_hex(4)}"
    with postgres_server.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    path = {"options": f"-csearch_path={schema}"}
    owner = make_url(POSTGRES_URL).update_query_dict(path).render_as_string(hide_password=False)
    app = (make_url(POSTGRES_URL).set(username=role, password=secrets.token_hex(16))
           .update_query_dict(path).render_as_string(hide_password=False))
    result = custom_resource.apply_migrations(lambda: owner, migrations_folder(), lambda: app)
    assert result["role"] == role and result["revision"]
    try:
        yield owner, app, schema
    finally:
        dispose(app)
        dispose(owner)
        with postgres_server.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
            connection.execute(text(f"DROP OWNED BY {role}"))
            connection.execute(text(f"DROP ROLE {role}"))


def app_engine(app: str) -> Engine:
    return create_engine(app, poolclass=NullPool)


def test_the_role_reads_and_writes_what_the_runtime_does(owner_and_app):
    _, app, _ = owner_and_app
    # A campaign's life: regions priced (insert, then upsert), data registered, a run started
    # with its jobs, recorded and finished, a TrainingRun's outcome recorded and rewritten.
    with transaction(app) as session:
        seed.add_regions(session)
        seed.add_regions(session, prices={"us-east-1": 27.0})
        seed.add_data_everywhere(session)
        run = RunRepository(session).start(seed.CAMPAIGN, "run-1", "arn:run-1", "cheapest", T0)
    with transaction(app) as session:
        RunRepository(session).finish("arn:run-1", "SUCCEEDED", T0)
        TrainingRunRepository(session).record(outcome("resnet-1", "FAILED", error="Lost"))
        TrainingRunRepository(session).record(outcome("resnet-1"))
    with transaction(app) as session:
        assert RegionRepository(session).require("us-east-1").prices[0].on_demand_usd_per_hour \
            == 27
        assert RunRepository(session).get("arn:run-1").status == "SUCCEEDED"
        assert run.id is not None


@pytest.mark.parametrize("statement", [
    "CREATE TABLE intruder (id integer)",
    "DROP TABLE training_runs",
    "ALTER TABLE training_runs ADD COLUMN intruder integer",
    "CREATE INDEX intruder ON training_runs (name)",
    "TRUNCATE training_runs",
    "DELETE FROM regions",
    "SELECT version_num FROM alembic_version",
    "UPDATE alembic_version SET version_num = '0001'",
    "CREATE ROLE intruder LOGIN",
    "CREATE SCHEMA intruder",
])
def test_the_role_cannot_change_the_schema_delete_or_touch_migrations(owner_and_app, statement):
    _, app, _ = owner_and_app
    engine = app_engine(app)
    with pytest.raises(ProgrammingError, match="(?i)permission denied|must be owner"), \
            engine.begin() as connection:
        connection.execute(text(statement))
    engine.dispose()


def test_migrating_again_updates_the_role_and_takes_back_privileges_granted_by_hand(
        owner_and_app, postgres_server):
    owner, app, schema = owner_and_app
    role = make_url(app).username
    with postgres_server.begin() as connection:
        connection.execute(text(f"GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role}"))
        connection.execute(text(f"GRANT CREATE ON SCHEMA {schema} TO {role}"))
    assert grant_runtime_access(owner, app) == role
    with postgres_server.connect() as connection:
        granted = set(connection.execute(text(
            "SELECT table_name || ':' || privilege_type FROM information_schema.table_privileges"
            " WHERE grantee = :role AND table_schema = :schema"),
            {"role": role, "schema": schema}).scalars())
        may_create = connection.execute(text("SELECT has_schema_privilege(:r, :s, 'CREATE')"),
                                        {"r": role, "s": schema}).scalar_one()
    tables = {"campaigns", "regions", "region_prices", "datasets", "campaign_runs",
              "region_jobs", "training_runs"}
    assert granted == {f"{t}:{p}" for t in tables for p in ("SELECT", "INSERT", "UPDATE")}
    assert not may_create


def test_a_secret_that_cannot_name_the_role_is_refused_with_every_problem(owner_and_app):
    owner, _, _ = owner_and_app
    as_owner = make_url(owner).set(database="other").render_as_string(hide_password=False)
    with pytest.raises(RoleInvalid) as refused:
        grant_runtime_access(owner, as_owner)
    assert "owner" in str(refused.value) and "no password" in str(refused.value)
    assert "database 'other'" in str(refused.value)
    quoted = make_url(owner).set(username='x"; DROP ROLE postgres; --', password="pässword")
    with pytest.raises(RoleInvalid, match="not a plain role name.*not printable ASCII"):
        grant_runtime_access(owner, quoted.render_as_string(hide_password=False))


def test_sqlite_has_no_roles_and_the_migration_still_runs(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'campaigns.db'}"
    result = custom_resource.apply_migrations(lambda: url, migrations_folder(), lambda: url)
    assert result["role"] == "" and result["revision"]
    dispose(url)


def test_any_printable_password_is_stored_as_its_verifier(owner_and_app, postgres_server):
    """Whatever it holds (quotes, a colon, a percent sign), a password becomes its verifier,
    sent as a literal the server quotes: no statement is broken, nothing else runs."""
    owner, app, _ = owner_and_app
    password = "it's :role %s %(x)s \\ \"; DROP ROLE postgres; --"
    url = make_url(app).set(password=password)
    assert grant_runtime_access(owner, url.render_as_string(hide_password=False)) \
        == url.username
    with postgres_server.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM pg_roles WHERE rolname = 'postgres'"
                                        )).scalar_one() == 1
        stored = connection.execute(text("SELECT rolpassword FROM pg_authid WHERE rolname = :r"),
                                    {"r": url.username}).scalar_one()
    assert stored == _recomputed(stored, password)


def _recomputed(stored: str, password: str) -> str:
    """``password``'s verifier with the salt and iterations of ``stored``."""
    iterations, salt = stored.split("$")[1].split(":")
    return scram_verifier(password, base64.b64decode(salt), int(iterations))


def test_the_verifier_sent_is_the_one_postgresql_makes_of_the_password(postgres_server):
    """The role's password is sent as its SCRAM verifier, never in plain text; PostgreSQL's
    own hashing of the same password, salt and iterations gives the same verifier."""
    role, password = f"tg_scram_{secrets.token_hex(4)}", "Zq8" + secrets.token_hex(12)
    with postgres_server.begin() as connection:
        connection.execute(text("SET password_encryption = 'scram-sha-256'"))
        connection.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'"))
        made = connection.execute(text("SELECT rolpassword FROM pg_authid WHERE rolname = :r"),
                                  {"r": role}).scalar_one()
        connection.execute(text(f"DROP ROLE {role}"))
    assert made == _recomputed(made, password)
    assert password not in scram_verifier(password)
