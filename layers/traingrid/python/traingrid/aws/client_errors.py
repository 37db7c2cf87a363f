"""Translate botocore's errors into TrainGrid's, once, at the adapter boundary: a service's
answer (ClientError) by its code, and a call that got no answer (the endpoint unreachable, a
connection or read timed out or closed, after botocore's own retries) as an AwsServiceError
too. botocore's other errors (a parameter refused by its model, no credentials, no region)
are bugs or configuration, not worth a retry: they raise as they are."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as NoConnection

from traingrid.errors import AwsServiceError, InvalidPageToken, ResourceNotFound

# botocore's errors of a call that got no answer: ConnectionError (EndpointConnectionError,
# ConnectTimeoutError, SSLError, ProxyConnectionError), HTTPClientError (ReadTimeoutError,
# ConnectionClosedError).
NO_ANSWER = (NoConnection, HTTPClientError)

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
    except NO_ANSWER as error:
        raise AwsServiceError(service, operation, type(error).__name__, str(error)) from error
