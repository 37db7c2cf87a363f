"""The campaign database's connection URL, from its Secrets Manager secret."""

from __future__ import annotations

import json
from functools import cache
from typing import TYPE_CHECKING
from urllib.parse import quote

from traingrid.aws.clients import client
from traingrid.aws.errors import translated

if TYPE_CHECKING:
    from traingrid.settings import DatabaseSettings


def url_from_secret(secret: dict[str, str], host: str | None = None,
                    database: str | None = None) -> str:
    """A SQLAlchemy URL: the secret's ``url``, or one built from RDS-style fields (an RDS
    managed master secret holds only username and password; host and name come from the
    stack)."""
    if "url" in secret:
        return secret["url"]
    user, password = quote(secret["username"], safe=""), quote(secret["password"], safe="")
    host = secret.get("host") or host
    port = secret.get("port", 5432)
    name = secret.get("dbname") or database or "traingrid"
    return f"postgresql+psycopg://{user}:{password}@{host}:{port}/{name}?sslmode=require"


@cache
def database_url(secret_arn: str, host: str | None = None, database: str | None = None) -> str:
    with translated("SecretsManager", "GetSecretValue"):
        value = client("secretsmanager").get_secret_value(SecretId=secret_arn)["SecretString"]
    return url_from_secret(json.loads(value), host, database)


def connection_url(settings: DatabaseSettings) -> str:
    """The URL of the database a function's settings name."""
    return database_url(settings.database_secret_arn, settings.database_host,
                        settings.database_name)
