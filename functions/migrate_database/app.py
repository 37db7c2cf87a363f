"""Apply the campaign database's migrations (shipped beside this file) to its latest revision, as
the database's owner, and keep the functions' own role in step with the schema."""

from pathlib import Path
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.aws.secrets import app_connection_url, connection_url
from traingrid.db import custom_resource
from traingrid.observability import logger, tracer
from traingrid.settings import MigrationSettings

settings = MigrationSettings.from_env()
MIGRATIONS = Path(__file__).with_name("migrations")  # schema/migrations, shipped with the code


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, str]:
    return custom_resource.handle(event, lambda: connection_url(settings), MIGRATIONS,
                                   lambda: app_connection_url(settings))
