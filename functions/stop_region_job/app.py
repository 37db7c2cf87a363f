"""Stop a region's training job whose checks failed, before its region is recorded failed."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import region_steps
from traingrid.observability import logger, tracer


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return region_steps.stop_region_job(event)
