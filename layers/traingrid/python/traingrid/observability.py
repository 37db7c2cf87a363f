"""The one logger, tracer and metrics of every function.

Service name and namespace come from the ``POWERTOOLS_*`` variables set in the template's
Globals. The X-Ray SDK is loaded only when tracing is on: creating a Powertools ``Tracer``
imports it (about 250 ms of cold start) even when tracing is disabled.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics

TRUE = ("1", "true", "yes", "on")


def tracing_enabled() -> bool:
    """Powertools' own rule: inside Lambda (not SAM local), unless POWERTOOLS_TRACE_DISABLED."""
    in_lambda = bool(os.environ.get("LAMBDA_TASK_ROOT")) and not os.environ.get("AWS_SAM_LOCAL")
    disabled = os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").lower() in TRUE
    return in_lambda and not disabled


class Untraced:
    """Stands in for the Tracer when tracing is off: its decorators return what they wrap."""

    def capture_lambda_handler(self, handler: Callable[..., Any] | None = None,
                               **_: Any) -> Any:
        return handler if handler is not None else (lambda wrapped: wrapped)

    capture_method = capture_lambda_handler

    def put_annotation(self, *_: Any, **__: Any) -> None:
        pass

    def put_metadata(self, *_: Any, **__: Any) -> None:
        pass


def _tracer() -> Any:
    if not tracing_enabled():
        return Untraced()
    from aws_lambda_powertools import Tracer

    return Tracer()


logger = Logger()
metrics = Metrics()
tracer = _tracer()
