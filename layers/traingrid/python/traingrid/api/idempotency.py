"""Idempotency-Key: a submission with the same key runs once.

The first request with a key runs and its response is kept (DynamoDB, ``IDEMPOTENCY_HOURS``);
a repeat gets that response again, never a second run. A repeat whose body differs is refused
(the key names one request), and one that arrives while the first is still running is asked
to retry. Powertools' idempotency utility (and the boto3 it imports) adds 160-280 ms to an
import, so it is loaded by the first request that carries a key, not by every cold start of the
API function: reads, the bulk of its requests, never need it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from traingrid.aws.clients import client
from traingrid.errors import IdempotencyKeyReused, RequestInProgress, RequestInvalid

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

HEADER = "Idempotency-Key"
IDEMPOTENCY_HOURS = 24
MAX_KEY_LENGTH = 255
# Visible ASCII, spaces only inside: what survives HTTP unchanged (a field value's outer
# whitespace is stripped). The OpenAPI document declares the same pattern.
KEY_PATTERN = re.compile(r"[!-~]([ -~]*[!-~])?")


def key_of(headers: dict[str, str]) -> str | None:
    """The request's Idempotency-Key (headers are case-insensitive), or None."""
    key = headers.get(HEADER)
    if key is None:
        return None
    if len(key) > MAX_KEY_LENGTH or not KEY_PATTERN.fullmatch(key):
        raise RequestInvalid([{"pointer": "", "message": f"the {HEADER} header must be 1-"
                               f"{MAX_KEY_LENGTH} visible ASCII characters (spaces only "
                               "inside)"}], "request headers")
    return key


def _submit(submission: dict[str, Any], submit: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return submit()


class Submissions:
    """Runs ``submit`` once per (route, Idempotency-Key)."""

    def __init__(self, table_name: str) -> None:
        self.table_name = table_name
        self.config: Any = None
        self._once: Callable[..., dict[str, Any]] | None = None

    def _idempotent(self) -> Callable[..., dict[str, Any]]:
        if self._once is None:
            from aws_lambda_powertools.utilities.idempotency import (
                DynamoDBPersistenceLayer,
                IdempotencyConfig,
                idempotent_function,
            )

            self.config = IdempotencyConfig(
                event_key_jmespath="[route, key]",
                payload_validation_jmespath="body",
                raise_on_no_idempotency_key=True,
                expires_after_seconds=IDEMPOTENCY_HOURS * 3600,
            )
            store = DynamoDBPersistenceLayer(table_name=self.table_name,
                                             boto3_client=client("dynamodb"))
            self._once = idempotent_function(
                data_keyword_argument="submission", persistence_store=store,
                config=self.config,
            )(_submit)
        return self._once

    def once(self, route: str, key: str | None, body: Any,
             submit: Callable[[], dict[str, Any]],
             context: LambdaContext | None = None) -> dict[str, Any]:
        if key is None:
            return submit()
        once = self._idempotent()
        from aws_lambda_powertools.utilities.idempotency.exceptions import (
            IdempotencyAlreadyInProgressError,
            IdempotencyValidationError,
        )

        if context is not None:
            self.config.register_lambda_context(context)
        try:
            return once(submission={"route": route, "key": key, "body": body}, submit=submit)
        except IdempotencyValidationError:
            raise IdempotencyKeyReused(
                f"This {HEADER} was used for a different request; use a new key for a new "
                "request.") from None
        except IdempotencyAlreadyInProgressError:
            raise RequestInProgress(
                f"The first request with this {HEADER} is still being handled; retry in a "
                "moment to get its response.") from None
