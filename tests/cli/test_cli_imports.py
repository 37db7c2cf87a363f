"""The commands that talk to an endpoint, and every help screen, load neither the emulator
(moto, its session, the stack deployed in it) nor the served API's server, SQLAlchemy or
botocore: each command runs in a fresh interpreter and what it imported is read at its end.
Only `demo`, `serve`, `console`, `faults` and `doctor` load what they need, when they run.
How fast the commands answer is `make bench`'s `cli_ms`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

# Loaded by a command that talks to an endpoint, each would cost it seconds (the emulator) or
# most of boto3's own import (botocore, SQLAlchemy).
HEAVY = ("moto", "sqlalchemy", "alembic", "boto3", "botocore",
         "traingrid_local.emulator.session", "traingrid_local.emulator.deploy",
         "traingrid_local.stack.environment", "traingrid_local.api.server",
         "traingrid_local.console.remote", "traingrid_local.demo.runner",
         "traingrid_local.demo.served", "traingrid_local.demo.fault_matrix",
         "traingrid_local.doctor")
# Runs the CLI in this interpreter with the arguments after the output file, then writes there
# which of HEAVY it imported (a module or one of its submodules).
PROBE = f"""
import json, sys
out, args = sys.argv[1], sys.argv[2:]
from traingrid_local.cli.main import app
if args:
    try:
        app(args, prog_name="traingrid")
    except SystemExit:
        pass
heavy = {HEAVY!r}
loaded = [h for h in heavy if any(m == h or m.startswith(h + ".") for m in sys.modules)]
open(out, "w").write(json.dumps(loaded))
"""


def refusing_endpoint() -> str:
    """A loopback port nothing listens on: a request is refused at once."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def heavy_modules_loaded(tmp_path: Path, *args: str) -> list[str]:
    out = tmp_path / "modules.json"
    result = subprocess.run([sys.executable, "-c", PROBE, str(out), *args], capture_output=True,
                            text=True, timeout=300, cwd=tmp_path)
    assert out.exists(), result.stdout + result.stderr
    return json.loads(out.read_text())


ENDPOINT_COMMANDS = [
    [],  # the import alone
    ["--help"],
    ["status", "resnet50"],
    ["runs"],
    ["logs", "resnet50"],
    ["submit", "--dataset", "s3://traingrid-demo-data/imagenet2012/resized/", "--nodes", "4"],
    ["watch", "resnet50"],
    ["costs"],
    ["plan", "--dataset", "s3://traingrid-demo-data/imagenet2012/resized/"],
    ["campaigns"],
    ["tick", "janitor"],
    ["package", "."],
]
HELP_SCREENS = [[command, "--help"] for command in (
    "demo", "scenarios", "serve", "console", "tick", "faults", "doctor", "plan", "package")]


@pytest.mark.parametrize("args", ENDPOINT_COMMANDS, ids=lambda a: " ".join(a) or "import")
def test_a_command_that_talks_to_an_endpoint_loads_no_emulator_server_or_sdk(tmp_path, args):
    endpoint = ["--endpoint", refusing_endpoint()] if args and args != ["--help"] else []
    assert heavy_modules_loaded(tmp_path, *args, *endpoint) == []


@pytest.mark.parametrize("args", HELP_SCREENS, ids=" ".join)
def test_no_help_screen_loads_them(tmp_path, args):
    assert heavy_modules_loaded(tmp_path, *args) == []


def test_the_demo_loads_the_emulator_when_it_runs(tmp_path):
    """The probe sees what a command imports: the demo's own, as it validates its options."""
    loaded = heavy_modules_loaded(tmp_path, "demo", "--pipeline", "neither")
    assert {"moto", "traingrid_local.emulator.session", "traingrid_local.demo.runner"} <= set(
        loaded)
