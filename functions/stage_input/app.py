"""Copy the next share of a region's data to the region its job trains in."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import region_steps
from traingrid.observability import logger, tracer


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return dict(region_steps.stage_input(event))
