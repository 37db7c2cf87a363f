"""``cli_ms``: the wall time of the ``traingrid`` commands a person runs most, each a fresh
process against a loopback API that answers at once (the CLI is measured, not a server), and
of a fresh process that imports boto3 alone, in the same rounds: the goal is a ratio, every
command at most 1.5× boto3's import, since absolute milliseconds move twofold between machines
from day to day. Both are timed from outside, so both include the interpreter's start.

``python -m traingrid_local.bench_cli`` measures it alone.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

from rich.console import Console
from rich.table import Table

# More rounds than a handler's import: the commands differ by tens of milliseconds, as much as
# a busy machine's noise.
RUNS = 9
BASELINE = "boto3_alone"
GOAL = 1.5  # × boto3's own import
RUN = "resnet50-demo"
VIEW = {"name": RUN, "pipeline": "TrainingRun", "status": "SUCCEEDED", "duration_s": 7260.0,
        "current_state": None, "console_url": f"http://127.0.0.1/console/runs/{RUN}",
        "states": [{"state": state, "offset_s": 60 * i, "duration_s": 60, "outcome": "succeeded"}
                   for i, state in enumerate(("PlanRun", "CreateFileSystem", "AwaitTrainingJob",
                                              "RecordRun"))],
        "artifacts": [{"location": f"s3://traingrid-demo-data/runs/{RUN}/", "region": None}],
        "cost": None}
# Each route the commands call, with an answer shaped as the API's.
ANSWERS: dict[tuple[str, str], tuple[int, Any]] = {
    ("GET", "/runs"): (200, {"runs": [
        {"name": f"{RUN}-{i}", "pipeline": "TrainingRun", "status": "SUCCEEDED",
         "started_at": "2026-11-22T02:00:00Z", "duration_s": 7260.0} for i in range(20)],
        "next_token": None}),
    ("GET", f"/runs/{RUN}"): (200, VIEW),
    ("GET", f"/runs/{RUN}/logs"): (200, {
        "name": RUN, "pipeline": "TrainingRun", "status": "SUCCEEDED", "error": None,
        "cause": None, "log": {"source": "node-0", "lines": [
            f"epoch {e} loss {1 / e:.3f}" for e in range(1, 41)]}}),
    ("POST", "/runs"): (202, {"name": RUN, "started": True, "status": "RUNNING",
                              "console_url": VIEW["console_url"]}),
}
DATASET = "s3://traingrid-demo-data/imagenet2012/resized/"
COMMANDS = {
    "help": ["--help"],
    "status": ["status", RUN],
    "runs": ["runs"],
    "logs": ["logs", RUN],
    "submit": ["submit", "--dataset", DATASET, "--nodes", "4"],
}


class _Api(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self._answer("GET")

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer("POST")

    def _answer(self, method: str) -> None:
        status, body = ANSWERS.get((method, self.path.split("?")[0]),
                                   (404, {"message": "no such route"}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def loopback_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _wall_ms(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    elapsed = (time.perf_counter() - started) * 1000
    if result.returncode != 0:  # an error's path is not the one measured
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr}")
    return elapsed


def measure() -> dict[str, Any]:
    """Medians of RUNS rounds; each round runs boto3's import and every command once, so a
    slower minute weighs on all of them."""
    traingrid = str(Path(sys.executable).with_name("traingrid"))
    env = {"PATH": os.environ.get("PATH", ""), "COLUMNS": "100", "NO_COLOR": "1"}
    times: dict[str, list[float]] = {name: [] for name in (BASELINE, *COMMANDS)}
    with loopback_api() as endpoint:
        for _ in range(RUNS):
            times[BASELINE].append(_wall_ms([sys.executable, "-c", "import boto3"], env))
            for name, args in COMMANDS.items():
                flags = [] if name == "help" else ["--endpoint", endpoint]
                times[name].append(_wall_ms([traingrid, *args, *flags], env))
    found = {name: round(statistics.median(ms), 1) for name, ms in times.items()}
    return {"cli_ms": found, "cli_ratio": ratios(found)}


def ratios(found: dict[str, float]) -> dict[str, Any]:
    base = found[BASELINE]
    each = {name: round(ms / base, 2) for name, ms in found.items() if name != BASELINE}
    slowest = max(each, key=each.__getitem__)
    return {"each": each, "slowest": each[slowest], "slowest_command": slowest}


def goals(results: dict[str, Any]) -> dict[str, Any]:
    ratio = results.get("cli_ratio")
    if not ratio:
        return {}
    return {"CLI, slowest of --help, status, runs, logs, submit (× boto3's own import)": {
        "value": ratio["slowest"], "at_most": GOAL, "unit": "×", "met": ratio["slowest"] <= GOAL,
        "command": ratio["slowest_command"], "baseline_ms": results["cli_ms"][BASELINE]}}


def add_rows(table: Table, results: dict[str, Any]) -> None:
    each = (results.get("cli_ratio") or {}).get("each", {})
    for name, ms in results.get("cli_ms", {}).items():
        what = "python -c 'import boto3'" if name == BASELINE else " ".join(
            ["traingrid", *COMMANDS[name]])
        times = f" ({each[name]:.2f}× boto3)" if name in each else ""
        table.add_row(f"cli: {what}", f"{ms:.0f} ms{times}")


def main() -> int:
    results = measure()
    table = Table(title=f"the CLI against a loopback API (medians of {RUNS})")
    table.add_column("measure")
    table.add_column("value", justify="right")
    add_rows(table, results)
    for name, goal in goals(results).items():
        table.add_row(f"goal: {name} ≤ {goal['at_most']}",
                      f"{goal['value']}× ({goal['command']}): "
                      f"{'met' if goal['met'] else 'NOT MET'}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
