"""Idempotency-Key: a submission with the same key runs once.

The first request with a key runs and its response is kept (DynamoDB, ``IDEMPOTENCY_HOURS``);
a repeat gets that response again, never a second run. A repeat whose body differs is refused
(the key names one request), and one that arrives while the first is still running is asked
to retry. Only the API function loads this module (Powertools' idempotency utility adds
about 160 ms to a cold start).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyValidationError,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from traingrid.aws.clients import client
from traingrid.errors import IdempotencyKeyReused, RequestInProgress, RequestInvalid

HEADER = "Idempotency-Key"
IDEMPOTENCY_HOURS = 24
MAX_KEY_LENGTH = 255


def key_of(headers: dict[str, str]) -> str | None:
    """The request's Idempotency-Key (headers are case-insensitive), or None."""
    key = headers.get(HEADER)
    if key is None:
        return None
    if not 0 < len(key) <= MAX_KEY_LENGTH or not key.isprintable():
        raise RequestInvalid([{"pointer": "", "message": f"the {HEADER} header must be 1-"
                               f"{MAX_KEY_LENGTH} printable characters"}], "request headers")
    return key


def _submit(submission: dict[str, Any], submit: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return submit()


class Submissions:
    """Runs ``submit`` once per (route, Idempotency-Key)."""

    def __init__(self, table_name: str) -> None:
        self.config = IdempotencyConfig(
            event_key_jmespath="[route, key]",
            payload_validation_jmespath="body",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=IDEMPOTENCY_HOURS * 3600,
        )
        store = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client("dynamodb"))
        self._once = idempotent_function(
            data_keyword_argument="submission", persistence_store=store, config=self.config,
        )(_submit)

    def once(self, route: str, key: str | None, body: Any,
             submit: Callable[[], dict[str, Any]],
             context: LambdaContext | None = None) -> dict[str, Any]:
        if key is None:
            return submit()
        if context is not None:
            self.config.register_lambda_context(context)
        try:
            return self._once(submission={"route": route, "key": key, "body": body},
                              submit=submit)
        except IdempotencyValidationError:
            raise IdempotencyKeyReused(
                f"This {HEADER} was used for a different request; use a new key for a new "
                "request.") from None
        except IdempotencyAlreadyInProgressError:
            raise RequestInProgress(
                f"The first request with this {HEADER} is still being handled; retry in a "
                "moment to get its response.") from None
