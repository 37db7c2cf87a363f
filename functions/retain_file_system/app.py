"""Keep a file system whose archive failed, tagged with its expiry."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.settings import Settings
from traingrid.training import steps

settings = Settings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return steps.retain_file_system(event, settings)
