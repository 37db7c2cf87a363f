"""The one logger, tracer and metrics of every function.

Service name and namespace come from the ``POWERTOOLS_*`` variables set in the template's
Globals. The X-Ray SDK is only loaded when tracing is enabled, keeping cold starts small.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
metrics = Metrics()
tracer = Tracer()
