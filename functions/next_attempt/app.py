"""The training job failed: submit another attempt (fewer nodes, or resuming), or go on."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.training import steps


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return dict(steps.next_attempt(event))
