"""The campaign database's connection URL, from its Secrets Manager secret."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from traingrid.aws.client_errors import translated
from traingrid.aws.clients import client

if TYPE_CHECKING:
    from traingrid.settings import DatabaseSettings, MigrationSettings

# The RDS certificate authorities' global bundle ships in the database layer (layers/database,
# which Lambda unpacks under /opt/python); DATABASE_CA_BUNDLE names another file.
CA_BUNDLE_NAME = Path("rds-ca") / "global-bundle.pem"
_CA_BUNDLE_PLACES = (Path("/opt/python") / CA_BUNDLE_NAME,
                     Path(__file__).resolve().parents[4] / "database" / CA_BUNDLE_NAME)


def ca_bundle() -> Path:
    """The certificates a database server's must chain to: ``DATABASE_CA_BUNDLE`` if set, else
    the layer's RDS bundle. A missing bundle is an error, never a connection left unverified."""
    configured = os.environ.get("DATABASE_CA_BUNDLE")
    candidates = (Path(configured),) if configured else _CA_BUNDLE_PLACES
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError("no CA bundle to verify the database server with: looked at "
                            + ", ".join(str(p) for p in candidates))


def url_from_secret(secret: dict[str, str], host: str | None = None,
                    database: str | None = None) -> str:
    """A SQLAlchemy URL: the secret's ``url`` as given, or one built from RDS-style fields (an
    RDS managed master secret holds only username and password; host and name come from the
    stack). A built URL verifies the server: its certificate must chain to the RDS CA bundle
    and name the host (``sslmode=verify-full``)."""
    if "url" in secret:
        return secret["url"]
    user, password = quote(secret["username"], safe=""), quote(secret["password"], safe="")
    host = secret.get("host") or host
    port = secret.get("port", 5432)
    name = secret.get("dbname") or database or "traingrid"
    root = quote(str(ca_bundle()), safe="/")
    return (f"postgresql+psycopg://{user}:{password}@{host}:{port}/{name}"
            f"?sslmode=verify-full&sslrootcert={root}")


@cache
def database_url(secret_arn: str, host: str | None = None, database: str | None = None) -> str:
    with translated("SecretsManager", "GetSecretValue"):
        value = client("secretsmanager").get_secret_value(SecretId=secret_arn)["SecretString"]
    return url_from_secret(json.loads(value), host, database)


def connection_url(settings: DatabaseSettings) -> str:
    """The URL of the database a function's settings name (for the functions: as their own
    role; for the migration: as the database's owner)."""
    return database_url(settings.database_secret_arn, settings.database_host,
                        settings.database_name)


def app_connection_url(settings: MigrationSettings) -> str:
    """The URL the functions connect with: the migration keeps their role in step with it."""
    return database_url(settings.database_app_secret_arn, settings.database_host,
                        settings.database_name)
