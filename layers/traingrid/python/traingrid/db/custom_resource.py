"""The stack's CloudFormation custom resource: the campaign database's schema, brought to the
latest migration on every deploy (its ``SchemaRevision`` property changes with each new
migration), or when the function is invoked by hand; then the functions' own role is brought in
step with the schema. The migrating itself is the data layer's (``traingrid.db.migrate``,
``traingrid.db.roles``); answering CloudFormation is this module's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from traingrid.aws.cloudformation import respond
from traingrid.db.migrate import current, upgrade
from traingrid.db.roles import grant_runtime_access
from traingrid.observability import logger

PHYSICAL_ID = "traingrid-campaign-database-schema"


def apply_migrations(database_url: Callable[[], str], folder: Path,
                     app_database_url: Callable[[], str] | None = None) -> dict[str, str]:
    """Migrate as the owner (``database_url``), then grant the functions' role
    (``app_database_url``) what the migrated schema's runtime needs."""
    url = database_url()
    before = current(url)
    upgrade(url, folder=folder)
    after = current(url) or ""
    role = grant_runtime_access(url, app_database_url()) if app_database_url else None
    logger.info("schema migrated", extra={"from": before, "to": after, "role": role})
    return {"from": before or "", "revision": after, "role": role or ""}


def handle(event: dict[str, Any], database_url: Callable[[], str], folder: Path,
           app_database_url: Callable[[], str] | None = None) -> dict[str, str]:
    """The URLs are read inside the answer to CloudFormation, so that failing to read them
    (the secrets, the network) is answered too instead of leaving the stack waiting."""
    if "RequestType" not in event:
        return apply_migrations(database_url, folder, app_database_url)
    if event["RequestType"] == "Delete":  # the data outlives the stack's custom resource
        respond(event, "SUCCESS", "nothing to do on delete", PHYSICAL_ID)
        return {}
    try:
        result = apply_migrations(database_url, folder, app_database_url)
    except Exception as error:
        respond(event, "FAILED", f"migration failed: {error}", PHYSICAL_ID)
        raise
    respond(event, "SUCCESS", f"schema at {result['revision']}", PHYSICAL_ID, result)
    return result
