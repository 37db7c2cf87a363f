"""Run ``make`` stages, timing each, and print their wall times at the end (also when one
fails, which stops the rest): ``python3 tools/stages.py lint "mpi-smoke NODES=2" ...``.

Each argument is a stage: one make command line (targets and variables). An argument of
lanes joined by `` & `` runs the lanes side by side, each lane's stages (joined by `` ; ``)
one after another: they use both cores where one stage alone leaves one idle (waits on
processes, a single-threaded tool). A lane's output is kept in ``test-artifacts/stages/`` and
printed whole when the lane ends. ``make test`` runs its stages through this, so a stage that
has grown slow shows in the last lines of its output. Standard library only: it runs before
any venv exists.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

LOGS = Path("test-artifacts") / "stages"
Ran = tuple[str, float, int]  # stage, wall seconds, exit status


def _run(stage: str, out: IO[str] | None = None) -> Ran:
    began = time.monotonic()
    print(f"==> make {stage}", file=out or sys.stdout, flush=True)
    status = subprocess.call([os.environ.get("MAKE", "make"), "--no-print-directory",
                              *stage.split()], stdout=out, stderr=subprocess.STDOUT if out
                             else None)
    return stage, time.monotonic() - began, status


def _lane(stages: list[str], log: Path, ran: list[Ran]) -> None:
    with log.open("w") as out:
        for stage in stages:
            ran.append(_run(stage, out))
            if ran[-1][2] != 0:
                return


def _side_by_side(lanes: list[list[str]]) -> list[Ran]:
    LOGS.mkdir(parents=True, exist_ok=True)
    results: list[list[Ran]] = [[] for _ in lanes]
    threads = []
    for index, stages in enumerate(lanes):
        log = LOGS / f"lane-{index + 1}.log"
        print(f"==> side by side, lane {index + 1}: {' ; '.join(stages)} (output: {log})",
              flush=True)
        thread = threading.Thread(target=_lane, args=(stages, log, results[index]))
        thread.start()
        threads.append((thread, log))
    for thread, log in threads:
        thread.join()
        sys.stdout.write(log.read_text(errors="replace"))
        sys.stdout.flush()
    return [entry for ran in results for entry in ran]


def main(arguments: list[str]) -> int:
    ran: list[Ran] = []
    planned: list[str] = []
    started = time.monotonic()
    for argument in arguments:
        lanes = [[s.strip() for s in lane.split(";") if s.strip()]
                 for lane in argument.split("&")]
        lanes = [lane for lane in lanes if lane]
        planned += [stage for lane in lanes for stage in lane]
        if any(status != 0 for _, _, status in ran):
            continue
        if len(lanes) > 1:
            ran += _side_by_side(lanes)
            continue
        for stage in lanes[0]:
            ran.append(_run(stage))
            if ran[-1][2] != 0:
                break
    total = time.monotonic() - started
    width = max([len(stage) for stage in planned] + [5])
    print("\nmake test, each stage's wall time (side-by-side lanes overlap):")
    for stage, seconds, status in ran:
        outcome = "" if status == 0 else f"  FAILED (exit {status})"
        print(f"  {stage:<{width}}  {seconds / 60:5.1f} min  {seconds:7.1f} s{outcome}")
    done = {stage for stage, _, _ in ran}
    if skipped := [stage for stage in planned if stage not in done]:
        print(f"  not run: {', '.join(skipped)}")
    print(f"  {'total':<{width}}  {total / 60:5.1f} min  {total:7.1f} s", flush=True)
    return next((status for _, _, status in ran if status != 0), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
