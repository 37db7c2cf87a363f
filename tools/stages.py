"""Run ``make`` targets one after another, timing each, and print their wall times at the end
(also when one fails, which stops the rest): ``python3 tools/stages.py lint typecheck ...``.

``make test`` runs its stages through this, so a stage that has grown slow shows in the last
lines of its output. Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main(targets: list[str]) -> int:
    make = os.environ.get("MAKE", "make")
    ran: list[tuple[str, float, int]] = []
    started = time.monotonic()
    for target in targets:
        print(f"==> make {target}", flush=True)
        began = time.monotonic()
        status = subprocess.call([make, "--no-print-directory", target])
        ran.append((target, time.monotonic() - began, status))
        if status != 0:
            break
    total = time.monotonic() - started
    width = max(len(target) for target, _, _ in ran)
    print("\nmake test, each stage's wall time:")
    for target, seconds, status in ran:
        outcome = "" if status == 0 else f"  FAILED (exit {status})"
        print(f"  {target:<{width}}  {seconds / 60:5.1f} min  {seconds:7.1f} s{outcome}")
    skipped = targets[len(ran):]
    if skipped:
        print(f"  not run: {', '.join(skipped)}")
    print(f"  {'total':<{width}}  {total / 60:5.1f} min  {total:7.1f} s", flush=True)
    return ran[-1][2] if ran else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
