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
