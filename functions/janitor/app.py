"""The janitor: release what ended executions left behind (on a schedule, and at once when an
execution of this stack ends ABORTED, TIMED_OUT or FAILED)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.janitor.sweep import sweep
from traingrid.observability import logger, metrics, tracer
from traingrid.settings import JanitorSettings

settings = JanitorSettings.from_env()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return sweep(event, settings)
