"""The emulated job's training curves: what the trainer's nodes write as they train
(``traingrid_node.series``: ``metrics/node-<k>.jsonl`` among the outputs), so the API, the
console and ``traingrid watch`` have curves to show locally, while the job runs and after.

A point every ``window_s`` simulated seconds from the job's start: the loss falling from
ImageNet's ln(1000) towards 1, the learning rate's warmup and poly decay, each node's images/s
at the seeds' 625 a GPU (a percent or two apart), its step and input times. Under the
``straggler`` fault the middle node reads its data at a fraction of the others' pace: every
node steps at its pace (the job is synchronous) and it alone waits for its input. While the
job runs, alarms write and export the curves so far (``lfs hsm_archive``, as the trainer does)
``LIVE_WRITES`` times; the job's end writes them whole, with its other outputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from traingrid_node.series import SERIES_DIR, line, node_name, point

IMAGES_PER_SECOND_PER_GPU = 625  # workload's, the seeds' throughput
LIVE_WRITES = 24
MIN_WINDOW_S = 30.0
POINTS = 240  # a job's points when it trains its whole run
STRAGGLER_PACE = 0.7  # the straggler's share of the others' pace
BASE_LR = 0.1  # a global batch of 256's peak learning rate


def _number(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "")
    return int(raw) if raw.isdigit() else default


def window_s(training_seconds: float) -> float:
    return max(MIN_WINDOW_S, training_seconds / POINTS)


def node_files(env: Mapping[str, str], num_nodes: int, started_at: datetime,
               training_seconds: float, ran_seconds: float,
               straggler: bool) -> dict[str, bytes]:
    """Each node's file (relative to the output folder) after ``ran_seconds`` of training."""
    nodes = max(num_nodes, 1)
    gpus = max(_number(env, "MPI_GPUS", nodes), nodes)
    per_node, batch = gpus // nodes, _number(env, "BATCH_SIZE", 256)
    epochs, warmup = _number(env, "EPOCHS", 90), _number(env, "WARMUP_EPOCHS", 5)
    peak = BASE_LR * gpus * batch / 256
    slow = nodes // 2 if straggler and nodes > 1 else None
    pace = STRAGGLER_PACE if slow is not None else 1.0
    node_rate = per_node * IMAGES_PER_SECOND_PER_GPU * pace
    step_s = batch / (IMAGES_PER_SECOND_PER_GPU * pace)
    window = window_s(training_seconds)
    files: dict[str, list[str]] = {node_name(k): [] for k in range(nodes)}
    elapsed = window
    while elapsed <= ran_seconds + 1e-6:
        epoch = epochs * elapsed / training_seconds
        lr = (peak * epoch / warmup if epoch < warmup
              else peak * (1 - (epoch - warmup) / max(epochs - warmup, 1)) ** 2)
        t = (started_at + timedelta(seconds=elapsed)).timestamp()
        for k in range(nodes):
            wobble = 1 + ((k * 7 + int(elapsed / window)) % 5 - 2) / 100
            loss = math.log(1000) * math.exp(-3 * epoch / epochs) + 0.9 + (k % 3) * 0.01
            waits = step_s * (1 - STRAGGLER_PACE) if k == slow else 0.004 * wobble
            files[node_name(k)].append(line(point(
                t=t, step=int(elapsed / step_s), epoch=epoch, loss=loss * wobble,
                lr=max(lr, 0.0), images_per_s=node_rate * wobble, step_s=step_s / wobble,
                input_s=waits, gpu_util=(99 if k == slow else 97 * pace) * min(wobble, 1.0),
                gpu_mem_mib=14_200 + k)))
        elapsed += window
    return {f"{SERIES_DIR}/{node}.jsonl": "".join(lines).encode()
            for node, lines in files.items()}


def follow(job: Any, simulated: Any) -> None:
    """Alarms that write (and export) the curves so far while the job trains."""
    from moto.fsx.models import fsx_backends

    from traingrid_local.emulator import fault_injection, fsx
    from traingrid_local.emulator.alarms import ALARMS
    from traingrid_local.emulator.clock import CLOCK

    moments = dict(simulated.schedule())
    if "RUNNING" not in moments or simulated.stuck:
        return
    running = moments["RUNNING"]
    ends = moments.get("SUCCEEDED") or moments.get("FAILED") or running
    span = (ends - running).total_seconds()
    straggler = fault_injection.CURRENT.on("straggler")

    def write() -> None:
        if job.status != "RUNNING" or simulated.mount_error or simulated.bus_error:
            return
        env = simulated.environment
        fs: Any = next((found for found in fsx_backends[job.backend.account_id][
            job.backend.region_name].file_systems.values()
            if found.dns_name == env.get("FSX_DNS_NAME")), None)
        if fs is None:
            return
        mount = env.get("FSX_MOUNT_POINT", "/fsx").rstrip("/")
        root = env.get("OUTPUT_DIR", f"{mount}/output").removeprefix(mount).strip("/")
        written = {f"{root}/{name}": data for name, data in node_files(
            env, simulated.num_nodes, running, simulated.training_seconds,
            (CLOCK.now() - running).total_seconds(), straggler).items()}
        fs.files.update(written)
        if not fault_injection.CURRENT.on("export-failed"):
            fsx.export_files(job.backend.account_id, fs, written)

    for k in range(1, LIVE_WRITES + 1):
        ALARMS.at(running + timedelta(seconds=span * k / (LIVE_WRITES + 1)), write)
