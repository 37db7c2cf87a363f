"""Bring the campaign database's schema to the latest migration: when invoked by hand, and as
a CloudFormation custom resource on every deploy (its ``SchemaRevision`` property changes with
each new migration)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from traingrid.aws.cloudformation import respond
from traingrid.db.migrate import current, upgrade
from traingrid.observability import logger

PHYSICAL_ID = "traingrid-campaign-database-schema"


def apply_migrations(url: str, folder: Path) -> dict[str, str]:
    before = current(url)
    upgrade(url, folder=folder)
    after = current(url) or ""
    logger.info("schema migrated", extra={"from": before, "to": after})
    return {"from": before or "", "revision": after}


def handle(event: dict[str, Any], url: str, folder: Path) -> dict[str, str]:
    if "RequestType" not in event:
        return apply_migrations(url, folder)
    if event["RequestType"] == "Delete":  # the data outlives the stack's custom resource
        respond(event, "SUCCESS", "nothing to do on delete", PHYSICAL_ID)
        return {}
    try:
        result = apply_migrations(url, folder)
    except Exception as error:
        respond(event, "FAILED", f"migration failed: {error}", PHYSICAL_ID)
        raise
    respond(event, "SUCCESS", f"schema at {result['revision']}", PHYSICAL_ID, result)
    return result
