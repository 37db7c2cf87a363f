"""Plan a campaign's fan-out: one SageMaker job per region, from one SQL query."""

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.campaigns import database_steps
from traingrid.observability import logger, tracer
from traingrid.settings import PlanningSettings

settings = PlanningSettings.from_env()
MAX_CONCURRENCY = int(os.environ.get("FANOUT_MAX_CONCURRENCY", "10"))


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return database_steps.plan_fanout(event, settings, MAX_CONCURRENCY)
