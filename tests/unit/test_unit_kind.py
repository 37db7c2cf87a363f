"""docs/testing.md: the unit tests run without a deployment: none starts the emulator, serves
the API or deploys a stack (the integration, emulator and console tests do)."""

from __future__ import annotations

import ast
from pathlib import Path

UNIT = Path(__file__).resolve().parent
DEPLOYED = {"Emulator", "deploy_traingrid", "deploy", "served", "emulated", "run_scenario"}


def test_no_unit_test_starts_the_emulator_or_deploys():
    found = {}
    for path in UNIT.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in DEPLOYED:
                    found.setdefault(path.name, set()).add(name)
            elif isinstance(node, ast.arg) and node.arg in DEPLOYED:  # a fixture that deploys
                found.setdefault(path.name, set()).add(node.arg)
    assert not found, found
