"""The API honours schema/openapi.yaml, as Schemathesis judges it.

The tester runs as its users run it (`st run`, with the repository's schemathesis.toml) against
`traingrid serve` over real HTTP: the coverage phase (boundary and schema-breaking values), the
fuzzing phase and the stateful phase (POST /runs -> GET /runs/{name} -> /logs through the
document's links), with every check but the authentication ones. A fixed seed and no example
database make CI's run the one you get here. The server does not throttle here: the stage's
429 is documented on every operation, and tests/integration/test_concurrent_runs.py holds the
throttling itself; a tester kept under 20 requests a second would take minutes longer.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import serving

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SEED = "1"
EXAMPLES_PER_OPERATION = "30"


@pytest.fixture(scope="module")
def served_api(tmp_path_factory):
    with serving(tmp_path_factory, 600, "contract", throttled=False) as api:
        yield api


def test_schemathesis_finds_no_failure_in_any_phase(served_api, tmp_path):
    schemathesis = Path(sys.executable).with_name("st")
    report = tmp_path / "junit.xml"
    result = subprocess.run(
        [str(schemathesis), "--config-file", str(ROOT / "schemathesis.toml"), "--no-color",
         "run", str(ROOT / "schema" / "openapi.yaml"), "--url", served_api.url,
         "--seed", SEED, "--max-examples", EXAMPLES_PER_OPERATION,
         "--phases", "examples,coverage,fuzzing,stateful",
         "--report", "junit", "--report-junit-path", str(report)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env=os.environ | {"NO_COLOR": "1"})
    assert result.returncode == 0, result.stdout[-20_000:] + result.stderr[-5_000:]
    summary = result.stdout
    for phase in ("Coverage", "Fuzzing", "Stateful"):
        assert f"✅  {phase}" in summary, summary
    assert "13 selected / 13 total" in summary, summary
    assert report.read_text().count("<testcase") >= 13
