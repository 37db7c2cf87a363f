"""What the trainer leaves to watch it by while it trains: each node's curves as JSON Lines
(``traingrid_node.series``: ``metrics/node-<k>.jsonl``) and as TensorBoard event files
(``tensorboard/node-<k>/``), both among the outputs, so ``tensorboard --logdir`` on the run's
outputs in S3 shows every node as a run of its own. Under SageMaker the event files go to the
job's ``TensorBoardOutputConfig.LocalPath`` instead (``/opt/ml/output/tensorboard/node-<k>/``),
which SageMaker uploads to the job's ``S3OutputPath`` while it trains.

The first rank of each node records its node; the files reach S3 while the job trains
(``lfs hsm_archive``, at most every ``ARCHIVE_EVERY_S``, and when training ends), as the
checkpoints do.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from traingrid_node.config import ExportConfig
from traingrid_node.outputs import archive_now
from traingrid_node.series import TENSORBOARD_DIR, append, node_name, point, series_path
from traingrid_trainer.config import SAGEMAKER_TENSORBOARD, in_sagemaker
from traingrid_trainer.world import World

ARCHIVE_EVERY_S = 60.0
# The ranks on this rank's node, as each launcher says.
LOCAL_SIZE_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_SIZE", "LOCAL_WORLD_SIZE")
# TensorBoard's tags of each field of a point.
TAGS = {"loss": "train/loss", "lr": "train/lr", "images_per_s": "train/images_per_s",
        "step_s": "train/step_s", "input_s": "train/input_s", "gpu_util": "gpu/utilization",
        "gpu_mem_mib": "gpu/memory_mib"}


def node_of(world: World, env: Mapping[str, str]) -> tuple[int, int]:
    """(this rank's node, ranks a node): launchers place a node's ranks next to each other."""
    for name in LOCAL_SIZE_VARIABLES:
        if env.get(name, "").isdigit() and int(env[name]) > 0:
            per_node = int(env[name])
            return world.rank // per_node, per_node
    return world.rank, 1


class TimedBatches:
    """The batches, counting the seconds spent waiting for each."""

    def __init__(self, batches: Iterator[Any]) -> None:
        self.batches = batches
        self.waited = 0.0

    def __iter__(self) -> TimedBatches:
        return self

    def __next__(self) -> Any:
        started = time.perf_counter()
        try:
            return next(self.batches)
        finally:
            self.waited += time.perf_counter() - started

    def take_waited(self) -> float:
        waited, self.waited = self.waited, 0.0
        return waited


def tensorboard_dir(output_dir: Path, env: Mapping[str, str]) -> Path:
    """Where a node's TensorBoard files go: among the outputs, or SageMaker's LocalPath."""
    return Path(SAGEMAKER_TENSORBOARD) if in_sagemaker(env) else output_dir / TENSORBOARD_DIR


def _summary_writer(log_dir: Path) -> Any:
    from torch.utils.tensorboard import SummaryWriter  # needs the pinned tensorboard

    return SummaryWriter(log_dir=str(log_dir))


class Recorder:
    """One node's curves; a no-op on every rank but a node's first."""

    def __init__(self, output_dir: Path, world: World, device: torch.device,
                 export: ExportConfig | None, env: Mapping[str, str] = os.environ,
                 tensorboard: bool = True) -> None:
        self.node, self.ranks = node_of(world, env)
        self.active = world.local_rank == 0 and world.rank % self.ranks == 0
        self.device, self.export = device, export
        self.path = series_path(output_dir, self.node)
        self.log_dir = tensorboard_dir(output_dir, env) / node_name(self.node)
        self.writer = _summary_writer(self.log_dir) if self.active and tensorboard else None
        self.archived_at = time.monotonic()
        self.input: TimedBatches | None = None

    def timed(self, batches: Iterator[Any]) -> TimedBatches:
        """The batches, timed: the wait for them is each point's ``input_s``."""
        self.input = TimedBatches(batches)
        return self.input

    def _gpu(self) -> dict[str, float | None]:
        if self.device.type != "cuda":
            return {}
        try:
            utilization: float | None = float(torch.cuda.utilization(self.device))
        except Exception:  # noqa: BLE001 - no NVML in this image or driver: leave it out
            utilization = None
        memory = torch.cuda.max_memory_allocated(self.device) / 2**20
        torch.cuda.reset_peak_memory_stats(self.device)
        return {"gpu_util": utilization, "gpu_mem_mib": memory}

    def window(self, *, step: int, epoch: float, loss: float, lr: float, steps: int,
               batch_size: int, seconds: float) -> None:
        """A logged window of ``steps`` steps that took ``seconds``."""
        input_seconds = self.input.take_waited() if self.input else 0.0
        if not self.active or steps <= 0 or seconds <= 0:
            return
        document = point(t=time.time(), step=step, epoch=epoch, loss=loss, lr=lr,
                         images_per_s=steps * batch_size * self.ranks / seconds,
                         step_s=seconds / steps, input_s=input_seconds / steps, **self._gpu())
        append(self.path, document)
        if self.writer is not None:
            for name, tag in TAGS.items():
                if name in document:
                    self.writer.add_scalar(tag, document[name], step, walltime=document["t"])
            self.writer.flush()
        if time.monotonic() - self.archived_at >= ARCHIVE_EVERY_S:
            self.archive()

    def files(self) -> list[Path]:
        events = sorted(self.log_dir.glob("events.out.tfevents.*")) if self.writer else []
        return [p for p in (self.path, *events) if p.is_file()]

    def archive(self) -> None:
        """Send the curves so far to S3 (through the file system's data repository)."""
        self.archived_at = time.monotonic()
        if problem := archive_now(self.export, self.files()):
            print(f"[trainer] could not archive the curves to S3 yet ({problem})", flush=True)

    def close(self) -> None:
        if not self.active:
            return
        if self.writer is not None:
            self.writer.close()
        self.archive()
