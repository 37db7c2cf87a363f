"""Verify the archive and write runs/<run>/manifest.json.

Its event is the state machine's own state, typed as a TypedDict checked by mypy, not parsed
at run time: pydantic would add ~80 ms to every cold start.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.training import manifest
from traingrid.vocabulary.training_run import ArchiveState, WriteManifestEvent


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: WriteManifestEvent, context: LambdaContext) -> ArchiveState:
    return manifest.write_manifest(event)
