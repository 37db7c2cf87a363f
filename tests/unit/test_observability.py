"""Cold starts stay small: the X-Ray SDK is loaded only where tracing is on."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = ("import sys; from traingrid.observability import tracer; "
         "print(type(tracer).__name__, 'aws_xray_sdk' in sys.modules)")


def probe(**env: str) -> str:
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                            check=True, timeout=60, env={"PATH": "/usr/bin:/bin", **env})
    return result.stdout.strip()


@pytest.mark.parametrize("env", [
    {},  # outside Lambda
    {"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"},
])
def test_without_tracing_the_xray_sdk_is_not_loaded(env):
    assert probe(**env) == "Untraced False"


def test_in_lambda_with_tracing_on_the_powertools_tracer_is_used():
    assert probe(LAMBDA_TASK_ROOT="/var/task") == "Tracer True"


def test_untraced_decorators_return_what_they_wrap():
    from traingrid.observability import Untraced

    def handler(event, context):
        return event

    untraced = Untraced()
    assert untraced.capture_lambda_handler(handler) is handler
    assert untraced.capture_method()(handler) is handler
