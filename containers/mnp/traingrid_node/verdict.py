"""The trainer's verdict on the job, read by the main node while its launcher runs.

The trainer's watchdog (``traingrid_trainer.watchdog``) runs on the main node; when the steps
stop it writes ``{"status": 71, "reason": "... rank 1 on node 1 ..."}`` to the file named by
``TRAINGRID_VERDICT_FILE`` and exits. The node then stops the launcher and ends with that
status: under mpirun the rank's exit would end the job anyway, but elastic torchrun would
restart the hung workers (and hang again) instead of ending the job.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from traingrid_node.status import log

VERDICT_VARIABLE = "TRAINGRID_VERDICT_FILE"
DEFAULT_VERDICT_DIR = "/tmp/traingrid"


def verdict_path(hostfile: Path) -> Path:
    """Beside the host file (the rig gives each job its own): one per node program."""
    return hostfile.parent / f"verdict-{os.getpid()}.json"


def clear(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def write(path: Path, status: int, reason: str) -> None:
    """Atomically: the node never reads half a verdict."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps({"status": status, "reason": reason}))
    partial.replace(path)


def read(path: Path | None) -> tuple[int, str] | None:
    """The verdict, once written; a malformed one ends the job with status 1."""
    if path is None or not path.exists():
        return None
    try:
        document = json.loads(path.read_text())
        status, reason = int(document["status"]), str(document["reason"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log(f"unreadable verdict in {path}: {exc}")
        return 1, f"unreadable verdict ({exc})"
    return (status if 0 < status < 256 else 1), reason
