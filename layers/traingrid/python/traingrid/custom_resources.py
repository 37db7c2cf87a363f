"""The stack's CloudFormation custom resource: the campaign database's schema, brought to the
latest migration on every deploy (its ``SchemaRevision`` property changes with each new
migration), or when the function is invoked by hand. The migrating itself is the data layer's
(``traingrid.db.migrate``); answering CloudFormation is this module's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from traingrid.aws.cloudformation import respond
from traingrid.db.migrate import current, upgrade
from traingrid.observability import logger

PHYSICAL_ID = "traingrid-campaign-database-schema"


def apply_migrations(database_url: Callable[[], str], folder: Path) -> dict[str, str]:
    url = database_url()
    before = current(url)
    upgrade(url, folder=folder)
    after = current(url) or ""
    logger.info("schema migrated", extra={"from": before, "to": after})
    return {"from": before or "", "revision": after}


def handle(event: dict[str, Any], database_url: Callable[[], str],
           folder: Path) -> dict[str, str]:
    """``database_url`` is read inside the answer to CloudFormation, so that failing to read
    it (the secret, the network) is answered too instead of leaving the stack waiting."""
    if "RequestType" not in event:
        return apply_migrations(database_url, folder)
    if event["RequestType"] == "Delete":  # the data outlives the stack's custom resource
        respond(event, "SUCCESS", "nothing to do on delete", PHYSICAL_ID)
        return {}
    try:
        result = apply_migrations(database_url, folder)
    except Exception as error:
        respond(event, "FAILED", f"migration failed: {error}", PHYSICAL_ID)
        raise
    respond(event, "SUCCESS", f"schema at {result['revision']}", PHYSICAL_ID, result)
    return result
