"""Benchmarks of the trainer's input pipeline and of a node's GPUs.

- ``python3 -m traingrid_trainer --benchmark_input --data_dir D``: the real pipeline (one loader
  worker reading, decoding, augmenting and collating; the rank's device step) for a bounded
  time; one JSON line: ``images_per_s_per_worker``, ``mean_record_kib``, ``decoder``, ...
- ``python3 -m traingrid_trainer.bench input`` (``make bench-input``): ImageNet-like shards,
  the legacy and the current pipeline run in turns, their medians and ratio, and how many of
  each instance type's GPUs its vCPUs can feed.
- ``python3 -m traingrid_trainer.bench gpu`` (``make bench-gpu``): images/s per GPU on
  synthetic data and on the real pipeline, and NCCL all-reduce bus bandwidth; exits 0 with a
  message on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from traingrid_trainer import data, tfrecord
from traingrid_trainer.config import PIPELINES

# ResNet-50 v1.5 mixed-precision training images/s per GPU: NVIDIA's published figures, as
# the runtime's catalog cites them (layers/traingrid/python/traingrid/vocabulary/catalog.py,
# GPU_IMAGES_PER_S: DeepLearningExamples' resnet50v1.5 README, ~1,200 on a V100 and ~2,500 on
# an A100; the "Data Center Deep Learning Product Performance" page, ~3,000 on an H100 SXM).
# The image has no runtime package, so the figures are copied; a test keeps them equal.
GPU_IMAGES_PER_S = {"V100": 1200, "A100": 2500, "H100": 3000, "A10G": 800}
# (GPUs, vCPUs, GPU) of the catalog's instance types (its INSTANCE_TYPES; tested equal).
INSTANCE_TYPES = {
    "p3.2xlarge": (1, 8, "V100"),
    "p3.8xlarge": (4, 32, "V100"),
    "p3.16xlarge": (8, 64, "V100"),
    "p3dn.24xlarge": (8, 96, "V100"),
    "p4d.24xlarge": (8, 96, "A100"),
    "p5.48xlarge": (8, 192, "H100"),
    "g5.12xlarge": (4, 48, "A10G"),
    "g5.48xlarge": (8, 192, "A10G"),
}
# All-reduce bus bandwidth's ceiling per GPU, GB/s one way: NVLink's published per-GPU
# bandwidth halved (NVIDIA's data sheets: V100 SXM2 300 GB/s, A100 SXM4 600, H100 SXM5 900,
# both ways); the A10G has no NVLink (PCIe 4.0 x16: 32 GB/s one way).
BUS_GB_S = {"V100": 150.0, "A100": 300.0, "H100": 450.0, "A10G": 32.0}
REQUIRED_SPEEDUP = 2.0
BENCH_BATCH = 32  # small batches: many per run, so the loader's prefetch barely counts


def mean_record_kib(data_dir: Path, limit: int = 200) -> float:
    """Mean size of the first train shard's records (up to ``limit``), KiB."""
    files = data.shards(data_dir, data.TRAIN_PATTERN)
    sizes = []
    for record in tfrecord.read_file(files[0]) if files else ():
        sizes.append(len(record))
        if len(sizes) == limit:
            break
    return round(statistics.mean(sizes) / 1024, 1) if sizes else 0.0


def children_cpu_seconds() -> float | None:
    """User + system CPU seconds of this process's children (the loader's worker), from
    /proc; None where there is no /proc."""
    try:
        pids = [pid for task in Path("/proc/self/task").iterdir()
                for pid in (task / "children").read_text().split()]
        total = 0
        for pid in pids:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
    except (OSError, IndexError, ValueError):
        return None
    return total / os.sysconf("SC_CLK_TCK")


def benchmark_input(data_dir: Path, pipeline_name: str, seconds: float, batch_size: int,
                    image_size: int, device: torch.device) -> dict[str, Any]:
    """Images/s of one loader worker feeding ``device``, after two batches of warm-up."""
    pipeline = data.choose_pipeline(pipeline_name, device)
    batches = data.device_batches(data_dir, 0, 1, batch_size, image_size, 1, pipeline, device)
    for _ in range(2):  # the worker starts; the prefetched batches are used up
        next(batches)
    cpu_start, start, images = children_cpu_seconds(), time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        images += len(next(batches)[1])
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    cpu_end = children_cpu_seconds()
    worker_cpu = None if cpu_start is None or cpu_end is None else cpu_end - cpu_start
    return {
        "images_per_s_per_worker": round(images / elapsed, 1),
        # per second of the worker's own CPU time: what a core gives, however busy the host
        "images_per_cpu_s": round(images / worker_cpu, 1) if worker_cpu else None,
        "mean_record_kib": mean_record_kib(data_dir),
        "decoder": pipeline.decoder,
        "input_pipeline": pipeline.name,
        "device": device.type,
        "images": images,
        "seconds": round(elapsed, 2),
        "batch_size": batch_size,
        "image_size": image_size,
    }


def feedable_gpus(images_per_s_per_worker: float) -> list[dict[str, Any]]:
    """Per instance type: its GPUs' need, what its vCPUs give (one worker per vCPU, one vCPU
    per GPU left to its training process), and how many of its GPUs that feeds."""
    rows = []
    for name, (gpus, vcpus, gpu) in INSTANCE_TYPES.items():
        need = gpus * GPU_IMAGES_PER_S[gpu]
        supply = max(vcpus - gpus, 1) * images_per_s_per_worker
        rows.append({"instance_type": name, "gpu": gpu, "gpus": gpus, "vcpus": vcpus,
                     "images_per_s_needed": need, "images_per_s_from_cpus": round(supply),
                     "gpus_fed": min(gpus, int(supply // GPU_IMAGES_PER_S[gpu]))})
    return rows


def _run_input_benchmark(data_dir: Path, pipeline: str, seconds: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "traingrid_trainer", "--benchmark_input", "--data_dir",
               str(data_dir), "--input_pipeline", pipeline, "--benchmark_seconds",
               str(seconds), "--batch_size", str(BENCH_BATCH)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"bench-input: {' '.join(command)} exited {done.returncode}:\n"
                         f"{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 1) if len(values) == len(runs) else None


def input_main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-input-") as scratch:
        data_dir = args.data_dir
        if data_dir is None:
            from sample_data import write_imagenet_like_shards  # containers/mnp, not the image

            data_dir = Path(scratch)
            write_imagenet_like_shards(data_dir, shards=4, per_shard=60)
        runs: dict[str, list[dict[str, Any]]] = {"legacy": [], args.pipeline: []}
        for i in range(args.runs):  # in turns, so a busy moment of the host hits both
            for pipeline in runs:
                result = _run_input_benchmark(data_dir, pipeline, args.seconds)
                runs[pipeline].append(result)
                print(f"bench-input: run {i + 1}/{args.runs} {pipeline:6s} "
                      f"{result['images_per_s_per_worker']:7.1f} images/s "
                      f"({result['images_per_cpu_s']} per CPU second, {result['decoder']})",
                      file=sys.stderr, flush=True)
    before, after = runs["legacy"], runs[args.pipeline]
    summary: dict[str, Any] = {
        "mean_record_kib": after[0]["mean_record_kib"],
        "image_size": after[0]["image_size"],
        "runs": args.runs,
        "legacy": {"decoder": before[0]["decoder"],
                   "images_per_s_per_worker": _median(before, "images_per_s_per_worker"),
                   "images_per_cpu_s": _median(before, "images_per_cpu_s")},
        "current": {"decoder": after[0]["decoder"],
                    "images_per_s_per_worker": _median(after, "images_per_s_per_worker"),
                    "images_per_cpu_s": _median(after, "images_per_cpu_s")},
    }
    for key in ("images_per_s_per_worker", "images_per_cpu_s"):
        old, new = summary["legacy"][key], summary["current"][key]
        summary[f"speedup_{key}"] = round(new / old, 2) if old and new else None
    # Gated on CPU time when /proc gives it: wall time on a shared host measures the others too.
    speedup = summary["speedup_images_per_cpu_s"] or summary["speedup_images_per_s_per_worker"]
    rate = summary["current"]["images_per_cpu_s"] or summary["current"][
        "images_per_s_per_worker"]
    summary["instance_types"] = feedable_gpus(rate)
    print(json.dumps(summary))
    print(f"{'instance type':15s} {'GPUs':>4s} {'vCPUs':>5s} {'needed':>8s} "
          f"{'from CPUs':>9s}  GPUs fed ({rate:.0f} images/s a vCPU)", file=sys.stderr)
    for row in summary["instance_types"]:
        print(f"{row['instance_type']:15s} {row['gpus']:4d} {row['vcpus']:5d} "
              f"{row['images_per_s_needed']:8d} {row['images_per_s_from_cpus']:9d}  "
              f"{row['gpus_fed']}/{row['gpus']} {row['gpu']}", file=sys.stderr)
    if speedup is None or speedup < REQUIRED_SPEEDUP:
        print(f"bench-input: {speedup}× the legacy pipeline's images/s, under the required "
              f"{REQUIRED_SPEEDUP}×", file=sys.stderr)
        return 1
    return 0


# --- GPUs --------------------------------------------------------------------------------


def gpu_kind(name: str) -> str | None:
    return next((kind for kind in GPU_IMAGES_PER_S if kind in name.upper()), None)


def training_rate(batches: data.Batches, device: torch.device, steps: int,
                  warmup: int = 5) -> float:
    """ResNet-50 training images/s on one GPU (mixed precision, channels-last)."""
    from traingrid_trainer.model import resnet50

    # Module.to takes memory_format (documented, and at run time); torch's overloads omit it.
    model = resnet50().to(device, memory_format=torch.channels_last)  # type: ignore[call-overload]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    loss_of = torch.nn.CrossEntropyLoss()
    images_done, start = 0, 0.0
    for step in range(warmup + steps):
        if step == warmup:
            torch.cuda.synchronize(device)
            start, images_done = time.perf_counter(), 0
        images, labels = next(batches)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_of(model(images.contiguous(memory_format=torch.channels_last)), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        images_done += len(labels)
    torch.cuda.synchronize(device)
    return images_done / (time.perf_counter() - start)


def _allreduce_rank(rank: int, world: int, port: int, mib: int, iterations: int,
                    results: Any) -> None:
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    tensor = torch.ones(mib * 1024 * 1024 // 4, device=f"cuda:{rank}")
    for _ in range(5):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / iterations
    if rank == 0:
        algorithm = tensor.numel() * 4 / seconds / 1e9
        results.put(algorithm * 2 * (world - 1) / world)  # nccl-tests' bus bandwidth
    dist.destroy_process_group()


def allreduce_bus_gb_s(gpus: int, mib: int = 256, iterations: int = 20) -> float:
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    results = context.Queue()
    mp.start_processes(_allreduce_rank, args=(gpus, 29533, mib, iterations, results),
                       nprocs=gpus, start_method="spawn")
    return float(results.get(timeout=60))


def gpu_main(args: argparse.Namespace) -> int:
    if not torch.cuda.is_available():
        print("bench-gpu: no CUDA GPU on this machine (torch.cuda.is_available() is False); "
              "nothing measured. Run it on a GPU instance (the node image has the GPU build).")
        return 0
    device = torch.device("cuda", 0)
    gpus, name = torch.cuda.device_count(), torch.cuda.get_device_name(0)
    kind = gpu_kind(name)
    report: dict[str, Any] = {"gpu": name, "gpus": gpus, "batch_size": args.batch_size,
                              "published_images_per_s_per_gpu": GPU_IMAGES_PER_S.get(kind or "")}
    report["synthetic_images_per_s_per_gpu"] = round(training_rate(
        data.synthetic_batches(args.batch_size, 224, device, 0), device, args.steps), 1)
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as scratch:
        data_dir = args.data_dir
        if data_dir is None:
            from sample_data import write_imagenet_like_shards

            data_dir = Path(scratch)
            write_imagenet_like_shards(data_dir, shards=8, per_shard=64)
        pipeline = data.choose_pipeline(args.input_pipeline, device)
        workers = max(1, (os.cpu_count() or 2) // gpus - 1)
        batches = data.device_batches(data_dir, 0, 1, args.batch_size, 224, workers,
                                      pipeline, device)
        report["real_images_per_s_per_gpu"] = round(training_rate(batches, device,
                                                                  args.steps), 1)
        report.update(decoder=pipeline.decoder, loader_workers=workers)
    if gpus > 1:
        report["allreduce_bus_gb_s"] = round(allreduce_bus_gb_s(gpus), 1)
        report["published_bus_gb_s_ceiling"] = BUS_GB_S.get(kind or "")
    print(json.dumps(report))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m traingrid_trainer.bench")
    commands = parser.add_subparsers(dest="command", required=True)
    bench_input = commands.add_parser("input", help="the input pipeline, legacy and current")
    bench_input.add_argument("--runs", type=int, default=5)
    bench_input.add_argument("--seconds", type=float, default=10.0)
    bench_input.add_argument("--pipeline", choices=("auto", "cpu", "gpu"), default="auto")
    bench_input.add_argument("--data_dir", type=Path, default=None,
                             help="default: ImageNet-like shards made for the run")
    bench_gpu = commands.add_parser("gpu", help="images/s per GPU, all-reduce bandwidth")
    bench_gpu.add_argument("--batch_size", type=int, default=256)
    bench_gpu.add_argument("--steps", type=int, default=30)
    bench_gpu.add_argument("--input_pipeline", choices=PIPELINES, default="auto")
    bench_gpu.add_argument("--data_dir", type=Path, default=None)
    args = parser.parse_args(argv)
    return input_main(args) if args.command == "input" else gpu_main(args)


if __name__ == "__main__":
    sys.exit(main())
