"""Turn a failed TrainingRun's state into one readable error and cause for its Fail state."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.training.failures import explain


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, str]:
    explained = explain(event["execution"])
    logger.warning("run failed", extra=explained)
    return explained
