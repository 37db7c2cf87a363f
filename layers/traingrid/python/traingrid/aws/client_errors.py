"""Translate botocore's ClientError into TrainGrid's errors, once, at the adapter boundary."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import ClientError

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
