"""Wait for the multi-node training job: park the task token, check the job once."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, metrics, tracer
from traingrid.settings import CompletionSettings
from traingrid.training import completion

settings = CompletionSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return completion.await_job(event, settings)
