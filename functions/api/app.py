"""The TrainGrid REST API (API Gateway, IAM-authorised): submit runs and fan-outs, read runs."""

from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.api import resolver
from traingrid.observability import logger, metrics, tracer
from traingrid.settings import ApiSettings

app = resolver.build(ApiSettings.from_env())


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
