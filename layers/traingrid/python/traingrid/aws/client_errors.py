"""Translate botocore's errors into TrainGrid's, once, at the adapter boundary: a service's
answer (ClientError) by its code, and a call that got no answer (BotoCoreError: the endpoint
unreachable, a read timed out, after botocore's own retries) as an AwsServiceError too."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError

from traingrid.errors import AwsServiceError, InvalidPageToken, ResourceNotFound

NOT_FOUND_CODES = frozenset({
    "NoSuchKey", "NoSuchBucket", "404", "FileSystemNotFound", "DataRepositoryTaskNotFound",
    "ResourceNotFoundException", "ExecutionDoesNotExist", "StateMachineDoesNotExist",
    "ResourceNotFound",  # SageMaker's model, e.g. DescribeTrainingJob
})

INVALID_TOKEN_CODES = frozenset({"InvalidToken", "InvalidNextToken", "InvalidPaginationToken"})


@contextmanager
def translated(service: str, operation: str) -> Iterator[None]:
    try:
        yield
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "Unknown")
        message = error.response.get("Error", {}).get("Message", str(error))
        if code in NOT_FOUND_CODES:
            raise ResourceNotFound(f"{service}.{operation}: {code}: {message}") from error
        if code in INVALID_TOKEN_CODES:
            raise InvalidPageToken(f"{service}.{operation}: {code}: {message}") from error
        raise AwsServiceError(service, operation, code, message) from error
    except BotoCoreError as error:
        raise AwsServiceError(service, operation, type(error).__name__, str(error)) from error
