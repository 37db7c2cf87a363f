"""Validate a TrainingRun request and plan it (the state machine's first step)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.settings import Settings
from traingrid.training import plan_step

settings = Settings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return plan_step.plan(event, settings)
