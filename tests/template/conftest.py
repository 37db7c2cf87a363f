"""The template as written and as the SAM transform translates it (offline)."""

from __future__ import annotations

from typing import Any

import pytest

from traingrid_local.emulator.deploy import package, translate
from traingrid_local.templates import load_template


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def translated(template) -> dict[str, Any]:
    return translate(package(template, upload=lambda key, body: None))
