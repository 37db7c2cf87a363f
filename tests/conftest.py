"""Shared test helpers: events are loaded relative to this folder; hypothesis's profiles."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# CI (and `HYPOTHESIS_PROFILE=ci`) draws the same examples on every run, so a failure there
# is reproducible; elsewhere each run draws new ones and remembers the failures it finds.
settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                          print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI")
                                                               else "dev"))

EVENTS = Path(__file__).parent / "events"


@pytest.fixture
def load_event():
    def load(name: str) -> Any:
        return json.loads((EVENTS / name).read_text())

    return load


# The tests whose outcome a machine's pace could change: durations on a simulated clock, and
# real waits on browsers, servers and processes. `make load-check` runs them three times in a
# row while two other processes keep both cores busy; each must pass every time.
TIMING_MODULES = frozenset({
    "tests/console/test_console_browser.py", "tests/console/test_console_failure.py",
    "tests/console/test_console_remote.py", "tests/cli/test_cli_api.py",
    "tests/emulator/test_batch.py", "tests/emulator/test_clock.py",
    "tests/emulator/test_clock_fast_forward.py", "tests/emulator/test_fsx.py",
    "tests/emulator/test_lambda_inprocess.py", "tests/emulator/test_sagemaker.py",
    "tests/emulator/test_sfn_clock.py", "tests/emulator/test_sfn_faults.py",
    "tests/emulator/test_throttling.py", "tests/fuzz/test_cli.py",
    "tests/integration/test_api.py", "tests/integration/test_eks_backend.py",
    "tests/integration/test_janitor.py", "tests/integration/test_job_events.py",
    "tests/integration/test_load.py", "tests/integration/test_run_cost.py",
    "tests/integration/test_scheduled_retraining.py", "tests/integration/test_training_run.py",
    "tests/node/test_mnp_nodes.py",
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        if item.path.relative_to(root).as_posix() in TIMING_MODULES:
            item.add_marker(pytest.mark.timing)
