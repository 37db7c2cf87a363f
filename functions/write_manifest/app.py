"""WriteManifest: after the export task, verify the archive and write runs/<run>/manifest.json,
or fail (nothing deleted) when S3 still lacks a file of the job's output index.

Its event is the state machine's own state, typed as a TypedDict checked by mypy, not parsed
at run time.
"""

from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.observability import logger, tracer
from traingrid.training import manifest
from traingrid.vocabulary.training_run import ArchiveState, WriteManifestEvent


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def lambda_handler(event: WriteManifestEvent, context: LambdaContext) -> ArchiveState:
    return manifest.write_manifest(event)
