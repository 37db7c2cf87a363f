"""Shared test helpers: events are loaded relative to this folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

EVENTS = Path(__file__).parent / "events"


@pytest.fixture
def load_event():
    def load(name: str) -> Any:
        return json.loads((EVENTS / name).read_text())

    return load
