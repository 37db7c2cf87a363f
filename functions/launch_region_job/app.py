"""Start one region's SageMaker MPI training job, with that region's client."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import region_steps
from traingrid.observability import logger, tracer
from traingrid.settings import LaunchSettings

settings = LaunchSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    account = context.invoked_function_arn.split(":")[4]
    return region_steps.launch_region_job(event, settings, account)
