"""Record the fan-out's outcome; it fails only if a region finally failed."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import database_steps
from traingrid.observability import logger, tracer
from traingrid.settings import DatabaseSettings

settings = DatabaseSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return database_steps.finish_fanout(event, settings)
