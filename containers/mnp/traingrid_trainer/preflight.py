"""The pre-flight check: before the long run, the job measures itself for a bounded time and
fails at once, with an infrastructure exit code, when one node is far below the others.

Every rank measures, in this order:

- the all-reduce bus bandwidth across every rank (``torch.distributed``; bus bandwidth as
  nccl-tests defines it: bytes / time × 2(n-1)/n);
- its training rate on synthetic data: a few steps of the real model at the job's batch;
- its read throughput: up to ``read_mb`` MB of the dataset's train files (another file per
  rank), or nothing, with a note, when there are none.

The ranks gather every figure; each judges them the same way (``verdict``): a rank below
``min_share`` of the median of the others, or below the instance type's floor, fails the job.
Thresholds come from the job's ``TRAINGRID_PREFLIGHT`` (JSON, the plan's from the runtime's
catalog), else the defaults; they and the verdict live in ``traingrid_node.preflight``, which
the emulator's stand-in job uses too. The main rank writes ``preflight.json`` to the output folder
(what the run's next attempt reads and names in its reason).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from traingrid_node.preflight import PREFLIGHT_FILE, Thresholds, verdict
from traingrid_node.status import EXIT_PREFLIGHT
from traingrid_trainer import data
from traingrid_trainer.model import resnet50

__all__ = ["EXIT_PREFLIGHT", "PREFLIGHT_FILE", "Thresholds", "run", "verdict"]

# Test-only: this rank's training steps take ten times as long (it sleeps nine times each
# step's own time), as on a node with a throttled GPU; ranks sharing a CPU stay far apart.
SLOW_RANK_VARIABLE = "TRAINGRID_PREFLIGHT_SLOW_RANK"
# Test-only: this rank's first measurement is ten times as slow, a busy moment that passes.
BUSY_RANK_VARIABLE = "TRAINGRID_PREFLIGHT_BUSY_RANK"
MIB = 1024 * 1024


def rate_of(measured: Sequence[float]) -> float:
    """A rank's training rate is its best measurement: other work on the machine only ever
    slows a measurement, so the best is the nearest to what the node can do."""
    return max(measured)


def node_address(main_address: str, port: int) -> str:
    """The address this rank's node reaches the main node from (no packet is sent)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((main_address, port))
            return str(probe.getsockname()[0])
    except OSError:
        return socket.gethostname()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bus_bandwidth(size: int, device: torch.device, mib: int, deadline: float) -> float | None:
    """All-reduce bus bandwidth, GB/s (nccl-tests: algorithm bandwidth × 2(n-1)/n); None for
    one rank. Every rank runs the same iterations (the main rank's count is broadcast)."""
    if size == 1:
        return None
    tensor = torch.ones(max(mib, 1) * MIB // 4, device=device)
    dist.all_reduce(tensor)  # warms the connections
    _sync(device)
    start, iterations = time.perf_counter(), 0
    while True:
        dist.all_reduce(tensor)
        iterations += 1
        _sync(device)
        go_on = torch.tensor([1.0 if iterations < 5 and time.perf_counter() < deadline else 0.0],
                             device=device)
        dist.all_reduce(go_on, op=dist.ReduceOp.MIN)  # every rank stops together
        if not go_on.item():
            break
    seconds = (time.perf_counter() - start) / iterations
    return tensor.numel() * 4 / seconds / 1e9 * 2 * (size - 1) / size


class TrainingRate:
    """Images/s of this rank alone: a fresh copy of the model, one unmeasured step, then each
    ``measure`` runs up to ``steps`` (at least one) before its deadline. ``slow_rounds``
    (tests only) are the measurements made ten times as slow (it sleeps nine times each step's
    own time): every one for a slow node, only the first for a busy moment."""

    def __init__(self, batch_size: int, image_size: int, device: torch.device, steps: int,
                 slow_rounds: Callable[[int], bool] = lambda _: False) -> None:
        torch.manual_seed(0)
        self.model: nn.Module = resnet50().to(device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.loss_of = nn.CrossEntropyLoss()
        self.device, self.batch_size, self.steps = device, batch_size, steps
        self.batches = data.synthetic_batches(batch_size, image_size, device, 0)
        self.slow_rounds, self.rounds = slow_rounds, 0

    def _step(self, slow: bool) -> None:
        began = time.perf_counter()
        images, labels = next(self.batches)
        with torch.autocast(self.device.type, dtype=torch.float16,
                            enabled=self.device.type == "cuda"):
            loss = self.loss_of(self.model(images), labels)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        _sync(self.device)
        if slow:
            time.sleep(9 * (time.perf_counter() - began))

    def measure(self, deadline: float) -> float:
        slow = self.slow_rounds(self.rounds)
        if self.rounds == 0:
            self._step(slow)  # unmeasured: allocations and kernels' first runs
        self.rounds += 1
        start, done = time.perf_counter(), 0
        while done < max(self.steps, 1) and (done == 0 or time.perf_counter() < deadline):
            self._step(slow)
            done += 1
        return done * self.batch_size / (time.perf_counter() - start)


def read_throughput(files: Sequence[Path], rank: int, limit_mb: int,
                    deadline: float) -> tuple[float | None, int]:
    """(MB/s, bytes read) of this rank reading the files from its own offset, up to
    ``limit_mb`` MB or the deadline; (None, 0) with no files."""
    if not files or limit_mb <= 0:
        return None, 0
    ordered = [*files[rank % len(files):], *files[: rank % len(files)]]
    wanted, done = limit_mb * 1_000_000, 0
    start = time.perf_counter()
    for path in ordered:
        with path.open("rb", buffering=0) as handle:
            while done < wanted and (chunk := handle.read(4 * MIB)):
                done += len(chunk)
                if time.perf_counter() > deadline:
                    break
        if done >= wanted or time.perf_counter() > deadline:
            break
    seconds = time.perf_counter() - start
    return (done / 1e6 / seconds if done and seconds > 0 else None), done


@dataclass(frozen=True)
class Outcome:
    passed: bool
    cause: str
    document: dict[str, Any]


def gather(entry: dict[str, Any], size: int) -> list[dict[str, Any]]:
    if size == 1:
        return [entry]
    everyone: list[Any] = [None] * size
    dist.all_gather_object(everyone, entry)
    return [dict(e) for e in everyone]


def run(*, rank: int, size: int, main_address: str, port: int, device: torch.device,
        batch_size: int, image_size: int, data_dir: Path | None, output_dir: Path | None,
        thresholds: Thresholds, env: Mapping[str, str] | None = None,
        log: Callable[[str], None] = print) -> Outcome:
    """Measure, gather, judge; the main rank (``output_dir`` given) writes preflight.json."""
    env = os.environ if env is None else env
    began = time.perf_counter()
    deadline = began + thresholds.seconds
    notes = []
    bus = bus_bandwidth(size, device, thresholds.allreduce_mib,
                        began + thresholds.seconds * 0.2)
    if bus is None:
        notes.append("one rank: no all-reduce to measure")
    slow = env.get(SLOW_RANK_VARIABLE, "").strip() == str(rank)
    busy = env.get(BUSY_RANK_VARIABLE, "").strip() == str(rank)
    probe = TrainingRate(batch_size, image_size, device, thresholds.steps,
                         lambda round_: slow or (busy and round_ == 0))
    rates = [probe.measure(began + thresholds.seconds * 0.5)]
    files = data.shards(data_dir, data.TRAIN_PATTERN) if data_dir is not None else []
    read_mb_s, read_bytes = read_throughput(files, rank, thresholds.read_mb,
                                            began + thresholds.seconds * 0.6)
    entry = {"rank": rank, "address": node_address(main_address, port),
             "host": socket.gethostname(), "images_per_s": round(rate_of(rates), 1),
             "measured_images_per_s": [round(r, 1) for r in rates],
             "read_mb_s": None if read_mb_s is None else round(read_mb_s, 1),
             "read_mb": round(read_bytes / 1e6, 1), **({"slowed": True} if slow else {})}
    ranks = gather(entry, size)
    problems = verdict(ranks, bus, thresholds)
    # A rank judged slow may have met a busy moment: every rank measures again (alike, so the
    # ranks share the machine as before) and each is judged on its best figures. Every rank
    # sees the same figures, so all take the same number of rounds (no clock decides it).
    while problems and len(rates) <= thresholds.repeats:
        if output_dir is not None:
            log(f"pre-flight: {'; '.join(problems)}: measuring every rank again "
                f"({len(rates)} of {thresholds.repeats} repeats)")
        remaining = max(deadline - time.perf_counter(), 0.0)
        rates.append(probe.measure(time.perf_counter() + remaining / 3))
        entry["images_per_s"] = round(rate_of(rates), 1)
        entry["measured_images_per_s"] = [round(r, 1) for r in rates]
        if read_mb_s is not None:
            again, _ = read_throughput(files, rank, thresholds.read_mb,
                                       time.perf_counter() + remaining / 3)
            read_mb_s = rate_of([read_mb_s, again or 0.0])
            entry["read_mb_s"] = round(read_mb_s, 1)
        ranks = gather(entry, size)
        problems = verdict(ranks, bus, thresholds)
    del probe  # the check's model copy is gone: its memory goes back
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if all(r["read_mb_s"] is None for r in ranks):
        notes.append(f"no train-* files under {data_dir}: read probe skipped"
                     if data_dir is not None else "synthetic data: read probe skipped")
    cause = ("pre-flight check failed: " + "; ".join(problems)) if problems else ""
    document = {
        "passed": not problems, "cause": cause or None, "problems": problems, "notes": notes,
        "world_size": size, "batch_size": batch_size, "image_size": image_size,
        "allreduce_bus_gb_s": None if bus is None else round(bus, 3),
        "allreduce_mib": thresholds.allreduce_mib if bus is not None else 0,
        "median_images_per_s": round(statistics.median(r["images_per_s"] for r in ranks), 1),
        "rounds": len(rates), "ranks": ranks, "thresholds": asdict(thresholds),
        "seconds": round(time.perf_counter() - began, 2),
    }
    if output_dir is not None:
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / PREFLIGHT_FILE).write_text(json.dumps(document, indent=1) + "\n")
        log(f"pre-flight: {'passed' if not problems else cause} (median "
            f"{document['median_images_per_s']} images/s a rank, all-reduce "
            f"{document['allreduce_bus_gb_s']} GB/s, {document['seconds']}s); wrote "
            f"{output_dir / PREFLIGHT_FILE}")
    return Outcome(not problems, cause, document)
