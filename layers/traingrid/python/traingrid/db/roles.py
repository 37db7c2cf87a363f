"""The functions' own database role: it may read and write the campaign tables, nothing else.

The migration signs in as the database's owner; after migrating it creates or updates the
functions' role (password from the role's secret) and grants it exactly
:data:`RUNTIME_PRIVILEGES` on every table of the schema but Alembic's, and the sequences its
inserts draw ids from. The runtime never deletes a row or changes the schema, so the role can
neither. SQLite (the emulator's database) has no roles: nothing to do there.

The password goes to the server as its SCRAM-SHA-256 verifier, computed here, so that the
plain password never appears in a statement a server log could keep.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re

from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from traingrid.db.engine import engine_for

RUNTIME_PRIVILEGES = ("SELECT", "INSERT", "UPDATE")
MIGRATIONS_TABLE = "alembic_version"
# A role name that needs no quoting anywhere (PostgreSQL folds unquoted names to lower case).
ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class RoleInvalid(ValueError):
    """The functions' secret cannot name their role."""


SCRAM_ITERATIONS = 4096  # PostgreSQL's own default (scram_iterations)


def _plain_ascii(password: str) -> bool:
    return password.isascii() and password.isprintable()


def scram_verifier(password: str, salt: bytes | None = None,
                   iterations: int = SCRAM_ITERATIONS) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for ``password`` (RFC 5802/7677), in its
    ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`` form. Printable ASCII only:
    the server would SASLprep anything else first."""
    if not _plain_ascii(password):
        raise RoleInvalid("the password is not printable ASCII")
    salt = os.urandom(16) if salt is None else salt
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    b64 = base64.b64encode
    return (f"SCRAM-SHA-256${iterations}:{b64(salt).decode()}$"
            f"{b64(stored_key).decode()}:{b64(server_key).decode()}")


def _checked(owner_url: str, app_url: str) -> tuple[str, str]:
    owner, app = make_url(owner_url), make_url(app_url)
    problems = []
    if app.get_backend_name() != "postgresql":
        problems.append(f"its URL is for {app.get_backend_name()}, the owner's for PostgreSQL")
    if not app.username or not ROLE_NAME.fullmatch(app.username):
        problems.append(f"its user name {app.username!r} is not a plain role name "
                        f"({ROLE_NAME.pattern})")
    elif app.username == owner.username:
        problems.append("it names the database's owner: the functions need a role of their own")
    if not app.password:
        problems.append("it has no password")
    elif not _plain_ascii(str(app.password)):
        problems.append("its password is not printable ASCII (sent as its SCRAM verifier)")
    if app.database != owner.database:
        problems.append(f"it names database {app.database!r}, the migration {owner.database!r}")
    if problems:
        raise RoleInvalid("the functions' database secret: " + "; ".join(problems))
    return str(app.username), str(app.password)


def _statement(connection: Connection, template: str, *values: str) -> str:
    """A statement with its identifiers (%I) and literals (%L) quoted by the server."""
    names = {f"v{i}": value for i, value in enumerate(values)}
    casts = "".join(f", CAST(:{name} AS text)" for name in names)
    return connection.execute(text(f"SELECT format(CAST(:template AS text){casts})"),
                              {"template": template, **names}).scalar_one()


def _run(connection: Connection, template: str, *values: str) -> None:
    statement = _statement(connection, template, *values)
    # Straight to the driver without parameters, in the same transaction: a ':' or '%' in a
    # quoted password is then no placeholder.
    cursor = connection.connection.cursor()
    try:
        cursor.execute(statement)
    finally:
        cursor.close()


def grant_runtime_access(owner_url: str, app_url: str) -> str | None:
    """Create or update the role ``app_url`` signs in as and give it the runtime's privileges
    on the schema ``owner_url`` migrates (in one transaction). Returns the role's name; None
    where the database has no roles (SQLite)."""
    if make_url(owner_url).get_backend_name() != "postgresql":
        return None
    role, password = _checked(owner_url, app_url)
    with engine_for(owner_url).begin() as connection:
        exists = connection.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :role"),
                                    {"role": role}).first()
        _run(connection, ("ALTER" if exists else "CREATE") + " ROLE %I LOGIN PASSWORD %L",
             role, scram_verifier(password))
        schema = connection.execute(text("SELECT current_schema()")).scalar_one()
        database = connection.execute(text("SELECT current_database()")).scalar_one()
        _run(connection, "GRANT CONNECT ON DATABASE %I TO %I", database, role)
        _run(connection, "GRANT USAGE ON SCHEMA %I TO %I", schema, role)
        _run(connection, "REVOKE CREATE ON SCHEMA %I FROM %I", schema, role)
        # Start from nothing, so that a privilege granted by hand or by an older release goes.
        _run(connection, "REVOKE ALL ON ALL TABLES IN SCHEMA %I FROM %I", schema, role)
        _run(connection, "REVOKE ALL ON ALL SEQUENCES IN SCHEMA %I FROM %I", schema, role)
        tables = connection.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = :schema "
                 "AND tablename <> :migrations ORDER BY tablename"),
            {"schema": schema, "migrations": MIGRATIONS_TABLE}).scalars().all()
        for table in tables:
            _run(connection, f"GRANT {', '.join(RUNTIME_PRIVILEGES)} ON TABLE %I.%I TO %I",
                 schema, table, role)
        # Inserts draw their ids from the tables' sequences.
        _run(connection, "GRANT USAGE ON ALL SEQUENCES IN SCHEMA %I TO %I", schema, role)
    return role
