"""What a check says and how it asks AWS: a :class:`Finding` per problem (ok, warning or
blocker), and :class:`Aws`, through which every call goes, translating AWS's errors once: a
refusal (``AccessDenied``…) becomes an :class:`AwsError` that the check reports as a warning
naming the permission the doctor lacks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from traingrid.aws import clients

OK, WARNING, BLOCKER = "ok", "warning", "blocker"
DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation",
          "UnauthorizedAccess", "AuthorizationError"}


@dataclass(frozen=True)
class Finding:
    check: str
    status: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


class AwsError(Exception):
    """An AWS call failed: ``code`` is AWS's error code, ``action`` the IAM action."""

    def __init__(self, action: str, code: str, message: str) -> None:
        self.action, self.code, self.message = action, code, message
        super().__init__(f"{action}: {code}: {message}")

    @property
    def denied(self) -> bool:
        return self.code in DENIED


class Aws:
    """Every call the doctor makes, on the project's clients (one per service and region)."""

    def __init__(self, region: str) -> None:
        self.region = region

    def call(self, service: str, operation: str, region: str | None = None,
             **kwargs: Any) -> Any:
        client = clients.client(service, region or self.region)
        action = (f"{client.meta.service_model.signing_name}:"
                  f"{client.meta.method_to_api_mapping.get(operation, operation)}")
        try:
            return getattr(client, operation)(**kwargs)
        except ClientError as error:
            detail = error.response.get("Error", {})
            raise AwsError(action, str(detail.get("Code", "")),
                           str(detail.get("Message", ""))) from None
        except BotoCoreError as error:
            raise AwsError(action, type(error).__name__, str(error)) from None

    def pages(self, service: str, operation: str, key: str, region: str | None = None,
              **kwargs: Any) -> Iterator[Any]:
        token_in, token_out = ("Marker", "Marker") if service == "iam" else (
            "NextToken", "NextToken")
        while True:
            page = self.call(service, operation, region, **kwargs)
            yield from page.get(key, [])
            token = page.get(token_out) if service != "iam" or page.get("IsTruncated") else None
            if not token:
                return
            kwargs[token_in] = token
