"""Move a region's job to the plan's next acceptable region, or give up."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import region_steps
from traingrid.observability import logger, tracer


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return region_steps.next_region(event)
