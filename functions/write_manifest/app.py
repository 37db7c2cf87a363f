"""Verify the archive and write runs/<run>/manifest.json."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.training import manifest


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return manifest.write_manifest(event)
