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
catalog), else the defaults below. The main rank writes ``preflight.json`` to the output folder
(what the run's next attempt reads and names in its reason).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from traingrid_node.status import EXIT_PREFLIGHT
from traingrid_trainer import data
from traingrid_trainer.model import resnet50

__all__ = ["EXIT_PREFLIGHT", "PREFLIGHT_FILE", "Thresholds", "run", "verdict"]

PREFLIGHT_FILE = "preflight.json"
# Test-only: this rank's training steps take ten times as long (it sleeps nine times each
# step's own time), as on a node with a throttled GPU; ranks sharing a CPU stay far apart.
SLOW_RANK_VARIABLE = "TRAINGRID_PREFLIGHT_SLOW_RANK"
MIB = 1024 * 1024


@dataclass(frozen=True)
class Thresholds:
    """What the check measures and what fails it; 0 means no such floor."""

    min_share: float = 0.5  # of the median of the other ranks' images/s
    min_read_share: float = 0.25  # of the others' read MB/s (a shared file system is noisy)
    min_images_per_s: float = 0.0  # a rank's floor for the instance type
    min_bus_gb_s: float = 0.0  # the all-reduce's floor for the instance type
    min_read_mb_s: float = 0.0
    steps: int = 5  # measured training steps, after one unmeasured
    allreduce_mib: int = 64
    read_mb: int = 256
    seconds: float = 180.0  # the whole check's budget
    instance_type: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Thresholds:
        """The job's ``TRAINGRID_PREFLIGHT`` (a JSON object of these fields), else defaults.
        Unknown fields or wrong types are an error listing every problem."""
        raw = env.get("TRAINGRID_PREFLIGHT", "").strip()
        if not raw or raw in ("1", "on"):
            return cls()
        try:
            given = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"TRAINGRID_PREFLIGHT is not JSON: {exc}") from None
        if not isinstance(given, dict):
            raise ValueError("TRAINGRID_PREFLIGHT must be a JSON object")
        known = {f.name: f.type for f in fields(cls)}
        problems = [f"unknown field {k!r}" for k in given if k not in known]
        for key, value in given.items():
            if key == "instance_type":
                if not isinstance(value, str):
                    problems.append("instance_type must be a string")
            elif key in known and (not isinstance(value, int | float) or isinstance(value, bool)
                                   or value < 0):
                problems.append(f"{key} must be a number >= 0, not {value!r}")
        if problems:
            raise ValueError("TRAINGRID_PREFLIGHT: " + "; ".join(problems))
        return cls(**{k: (int(v) if k in ("steps", "allreduce_mib", "read_mb") else v)
                      for k, v in given.items()})


def _figure(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def verdict(ranks: Sequence[Mapping[str, Any]], bus_gb_s: float | None,
            thresholds: Thresholds) -> list[str]:
    """Every reason the job should not start, naming the node and the figure. ``ranks``: one
    entry a rank (``rank``, ``address``, ``images_per_s``, ``read_mb_s`` or None)."""
    problems = []
    kind = f" for {thresholds.instance_type}" if thresholds.instance_type else ""
    checks = (("images_per_s", "images/s", thresholds.min_share, thresholds.min_images_per_s),
              ("read_mb_s", "MB/s read", thresholds.min_read_share, thresholds.min_read_mb_s))
    for key, unit, share, floor in checks:
        measured = [(r, float(r[key])) for r in ranks if r.get(key) is not None]
        for entry, value in measured:
            node = f"node {entry['address']} (rank {entry['rank']})"
            others = [v for e, v in measured if e is not entry]
            if others and share:
                median = statistics.median(others)
                if value < share * median:
                    problems.append(f"{node}: {_figure(value)} {unit}, median "
                                    f"{_figure(median)}: below {share:.0%}")
                    continue
            if floor and value < floor:
                problems.append(f"{node}: {_figure(value)} {unit}, below the floor of "
                                f"{_figure(floor)}{kind}")
    if bus_gb_s is not None and thresholds.min_bus_gb_s and bus_gb_s < thresholds.min_bus_gb_s:
        problems.append(f"all-reduce bus bandwidth {bus_gb_s:.2f} GB/s across {len(ranks)} "
                        f"ranks, below the floor of {thresholds.min_bus_gb_s:g} GB/s{kind}")
    return problems


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


def training_rate(batch_size: int, image_size: int, device: torch.device, steps: int,
                  deadline: float, slow: bool) -> float:
    """Images/s of this rank alone: a fresh copy of the model, one unmeasured step, then up to
    ``steps`` (at least one) before the deadline."""
    torch.manual_seed(0)
    model: nn.Module = resnet50().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_of = nn.CrossEntropyLoss()
    cuda = device.type == "cuda"
    batches = data.synthetic_batches(batch_size, image_size, device, 0)

    def step() -> None:
        began = time.perf_counter()
        images, labels = next(batches)
        with torch.autocast(device.type, dtype=torch.float16, enabled=cuda):
            loss = loss_of(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        _sync(device)
        if slow:
            time.sleep(9 * (time.perf_counter() - began))

    step()
    start, done = time.perf_counter(), 0
    while done < max(steps, 1) and (done == 0 or time.perf_counter() < deadline):
        step()
        done += 1
    return done * batch_size / (time.perf_counter() - start)


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
    rate = training_rate(batch_size, image_size, device, thresholds.steps,
                         began + thresholds.seconds * 0.7, slow)
    files = data.shards(data_dir, data.TRAIN_PATTERN) if data_dir is not None else []
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the check's model copy is gone: its memory goes back
    read_mb_s, read_bytes = read_throughput(files, rank, thresholds.read_mb, deadline)
    entry = {"rank": rank, "address": node_address(main_address, port),
             "host": socket.gethostname(), "images_per_s": round(rate, 1),
             "read_mb_s": None if read_mb_s is None else round(read_mb_s, 1),
             "read_mb": round(read_bytes / 1e6, 1), **({"slowed": True} if slow else {})}
    ranks = gather(entry, size)
    if all(r["read_mb_s"] is None for r in ranks):
        notes.append(f"no train-* files under {data_dir}: read probe skipped"
                     if data_dir is not None else "synthetic data: read probe skipped")
    problems = verdict(ranks, bus, thresholds)
    cause = ("pre-flight check failed: " + "; ".join(problems)) if problems else ""
    document = {
        "passed": not problems, "cause": cause or None, "problems": problems, "notes": notes,
        "world_size": size, "batch_size": batch_size, "image_size": image_size,
        "allreduce_bus_gb_s": None if bus is None else round(bus, 3),
        "allreduce_mib": thresholds.allreduce_mib if bus is not None else 0,
        "median_images_per_s": round(statistics.median(r["images_per_s"] for r in ranks), 1),
        "ranks": ranks, "thresholds": asdict(thresholds),
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
