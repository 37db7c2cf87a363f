"""``cold_import_ms``: every handler's import in a fresh interpreter, as a Lambda cold start,
and boto3's own import in the same run (``boto3_alone``), against which the goals are ratios:
absolute milliseconds move twofold between machines from day to day, the ratio far less.

Goals: the API (a person waits) at most 1.5× boto3's own import, every step at most 2.5× (a
step inside a run of hours: its modules import at their tops, pydantic included; SQLAlchemy,
twice boto3's import by itself, loads when a step first uses the database, ``traingrid.db``).
The migration runs once a deploy (a custom resource) and is held to neither. (The handlers
make their clients from botocore's session and never import boto3 itself.)
``python -m traingrid_local.bench_imports`` measures it alone.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from traingrid_local.emulator.deploy import stand_in_environment

ROOT = Path(__file__).resolve().parents[2]
RUNS = 5
BASELINE = "boto3_alone"
API = "api"
API_GOAL = 1.5  # × boto3's own import
STEP_GOAL = 2.5
DEPLOY_TIME_FUNCTIONS = frozenset({"migrate_database"})  # once a deploy, not a cold start
TIMED = "import time; t = time.perf_counter(); {body}; print((time.perf_counter() - t) * 1000)"
IMPORT_HANDLER = TIMED.format(body=(
    "import importlib.util, sys; "
    "spec = importlib.util.spec_from_file_location('app', sys.argv[1]); "
    "spec.loader.exec_module(importlib.util.module_from_spec(spec))"))
IMPORT_BOTO3 = TIMED.format(body="import boto3")


def _median_ms(args: list[str]) -> float:
    env = {"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1",
           "POWERTOOLS_TRACE_DISABLED": "true"} | stand_in_environment()

    def once() -> float:
        result = subprocess.run([sys.executable, "-c", *args], capture_output=True, text=True,
                                check=True, timeout=120, env=env)
        return float(result.stdout.strip())

    return round(statistics.median(once() for _ in range(RUNS)), 1)


def measure() -> dict[str, Any]:
    """Each handler's import and boto3's own, medians of RUNS fresh interpreters; boto3's
    before and after the handlers, averaged, so that a slower minute weighs on both."""
    functions = sorted(p for p in (ROOT / "functions").iterdir() if (p / "app.py").is_file())
    found = {BASELINE: _median_ms([IMPORT_BOTO3])}
    found |= {f.name: _median_ms([IMPORT_HANDLER, str(f / "app.py")]) for f in functions}
    found[BASELINE] = round((found[BASELINE] + _median_ms([IMPORT_BOTO3])) / 2, 1)
    return {"cold_import_ms": found, "cold_import_ratio": ratios(found)}


def ratios(found: dict[str, float]) -> dict[str, Any]:
    """Each handler's import over boto3's own; the slowest step's (but the migration)."""
    base = found[BASELINE]
    each = {name: round(ms / base, 2) for name, ms in found.items() if name != BASELINE}
    steps = {name: r for name, r in each.items()
             if name != API and name not in DEPLOY_TIME_FUNCTIONS}
    slowest = max(steps, key=steps.__getitem__)
    return {"each": each, "api": each.get(API), "slowest_step": steps[slowest],
            "slowest_step_name": slowest}


def goals(results: dict[str, Any]) -> dict[str, Any]:
    ratio = results.get("cold_import_ratio")
    if not ratio:
        return {}
    base = results["cold_import_ms"][BASELINE]
    return {
        "cold import, the API (× boto3's own import)": {
            "value": ratio["api"], "at_most": API_GOAL, "unit": "×",
            "met": ratio["api"] <= API_GOAL, "baseline_ms": base},
        "cold import, slowest step but the migration (× boto3's own import)": {
            "value": ratio["slowest_step"], "at_most": STEP_GOAL, "unit": "×",
            "met": ratio["slowest_step"] <= STEP_GOAL, "step": ratio["slowest_step_name"],
            "baseline_ms": base},
    }


def add_rows(table: Table, results: dict[str, Any]) -> None:
    found = results.get("cold_import_ms", {})
    each = (results.get("cold_import_ratio") or {}).get("each", {})
    for name, ms in found.items():
        times = f" ({each[name]:.2f}× boto3)" if name in each else ""
        table.add_row(f"cold import: {name}", f"{ms:.0f} ms{times}")


def main() -> int:
    results = measure()
    table = Table(title="cold imports (medians)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    add_rows(table, results)
    for name, goal in goals(results).items():
        table.add_row(f"goal: {name} ≤ {goal['at_most']}",
                      f"{goal['value']}×: {'met' if goal['met'] else 'NOT MET'}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
