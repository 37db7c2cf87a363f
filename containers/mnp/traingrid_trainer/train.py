"""The training loop: set up the ranks, check the all-reduce, resume, train, checkpoint every
epoch, log throughput every N steps, evaluate and write metrics.json."""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from traingrid_node.config import ExportConfig, export_config
from traingrid_node.emf import Reporter
from traingrid_node.emf import started as emf_started
from traingrid_node.emf import stop as emf_stop
from traingrid_node.metrics import metrics_document, write_metrics
from traingrid_node.outputs import archive_now
from traingrid_trainer import checkpoint, data, preflight, watch, watchdog
from traingrid_trainer.bench import benchmark_input
from traingrid_trainer.config import TrainConfig, parse_args
from traingrid_trainer.model import resnet50
from traingrid_trainer.optim import build_optimizer, built_as
from traingrid_trainer.resilience import Resilience, restarted
from traingrid_trainer.schedule import Schedule, recipe
from traingrid_trainer.world import World, detect_world

EXIT_FAILED_RANK = 3
EXIT_NO_DATA = 66  # EX_NOINPUT
# A rank whose peer is gone fails this much later: mpirun reports the first rank to exit, and
# the job's status must be the failed rank's own (3 for --fail_rank, 66 for missing data, ...),
# not its peers' echo of it ("Connection closed by peer"), which races it.
PEER_LOST_GRACE_S = 5.0
PEER_LOST_SIGNS = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")

Batches = data.Batches


def log(world: World, message: str, every_rank: bool = False) -> None:
    if world.is_main or every_rank:
        print(f"[trainer rank {world.rank}/{world.size}] {message}", flush=True)


def check_allreduce(world: World, device: torch.device) -> bool:
    """Every rank contributes rank + 1: the sum is 1 + 2 + ... + size on every rank."""
    if world.size == 1:
        return True
    value = torch.tensor([float(world.rank + 1)], device=device)
    dist.all_reduce(value)
    return int(value.item()) == world.size * (world.size + 1) // 2


def batches_for(cfg: TrainConfig, world: World, device: torch.device) -> Batches:
    if cfg.synthetic:
        return data.synthetic_batches(cfg.batch_size, cfg.image_size, device, world.rank)
    pipeline = data.choose_pipeline(cfg.input_pipeline, device)
    log(world, f"input: {pipeline.name} pipeline, decoder {pipeline.decoder} ({pipeline.why}), "
               f"{cfg.loader_workers} loader workers")
    return data.device_batches(cfg.data_dir, world.rank, world.size, cfg.batch_size,
                               cfg.image_size, cfg.loader_workers, pipeline, device)


def evaluate(cfg: TrainConfig, world: World, model: nn.Module,
             device: torch.device) -> float | None:
    """Top-1 accuracy on the validation shards (each rank its share), or None without any."""
    if cfg.synthetic or not data.shards(cfg.data_dir, data.VALIDATION_PATTERN):
        return None
    model.eval()
    counts = torch.zeros(2, device=device)
    batches = data.device_batches(cfg.data_dir, world.rank, world.size, cfg.batch_size,
                                  cfg.image_size, cfg.loader_workers,
                                  data.choose_pipeline(cfg.input_pipeline, device), device,
                                  train=False)
    with torch.no_grad():
        for images, labels in batches:
            predicted = model(images).argmax(dim=1)
            counts[0] += (predicted == labels).sum()
            counts[1] += labels.numel()
    if world.size > 1:
        dist.all_reduce(counts)
    return round(float(counts[0] / counts[1]), 4) if counts[1] else None


def train_epoch(cfg: TrainConfig, world: World, epoch: int, steps_per_epoch: int,
                step_once: Callable[[float], torch.Tensor],
                schedule: Schedule, resilience: Resilience, first_step: int = 0,
                recorder: watch.Recorder | None = None,
                emf: Reporter | None = None) -> list[float]:
    """One epoch's steps from ``first_step``; returns the throughput (images/s, all ranks) of
    each logged window. The GPU is waited for only when a window is logged (reading the loss).
    Stops early on SIGTERM (``resilience.termination``)."""
    rates = []
    window_start, window_steps = time.perf_counter(), 0
    for step in range(first_step, steps_per_epoch):
        lr = schedule.lr(epoch + step / steps_per_epoch)
        resilience.before_step(epoch, step)
        loss = step_once(lr)
        window_steps += 1
        if window_steps == cfg.log_every or step + 1 == steps_per_epoch:
            loss_value = float(loss)  # waits for this step's kernels
            rate = window_steps * cfg.batch_size * world.size / (time.perf_counter()
                                                                  - window_start)
            rates.append(rate)
            if emf is not None:  # this node's window, as CloudWatch metrics (traingrid_node.emf)
                emf.window(window_steps, time.perf_counter() - window_start, cfg.batch_size,
                           loss_value, lr)
            log(world, f"epoch {epoch + 1}/{cfg.epochs} step {step + 1}/{steps_per_epoch} "
                       f"loss {loss_value:.4f} lr {lr:.5f} images/s {rate:.1f} "
                       f"({rate / world.size:.1f} per GPU)")
            if recorder is not None:
                recorder.window(step=epoch * steps_per_epoch + step + 1,
                                epoch=epoch + (step + 1) / steps_per_epoch, loss=loss_value,
                                lr=lr, steps=window_steps, batch_size=cfg.batch_size,
                                seconds=time.perf_counter() - window_start)
            window_start, window_steps = time.perf_counter(), 0
        if resilience.after_step():
            break
    return rates


def save_checkpoint(cfg: TrainConfig, epoch: int, model: nn.Module,
                    optimizer: torch.optim.Optimizer, export: ExportConfig | None,
                    step: int = 0, steps_per_epoch: int = 0) -> Path:
    """Save the checkpoint and send it to S3 at once, so it outlives this job's host
    (a failed archive only delays it: the run's export copies it later)."""
    saved = checkpoint.save(cfg.checkpoint_dir, epoch, model, optimizer, step, steps_per_epoch)
    if problem := archive_now(export, [saved]):
        print(f"[trainer] could not archive {saved.name} to S3 yet ({problem}); the run's "
              "export copies it later", flush=True)
    return saved


def resume(cfg: TrainConfig, world: World, model: nn.Module,
           schedule: Schedule) -> tuple[torch.optim.Optimizer, checkpoint.Resumed | None]:
    """The recipe's optimizer and the newest checkpoint's weights and optimizer state, if any."""
    def build() -> torch.optim.Optimizer:
        return build_optimizer(schedule.optimizer, model, schedule.start_lr, cfg.momentum,
                               cfg.weight_decay, cfg.trust_coefficient)

    optimizer = build()
    resumed = checkpoint.resume(cfg.checkpoint_dir, model, optimizer)
    if resumed:
        within = f" step {resumed.step}" if resumed.step else ""
        log(world, f"resuming after epoch {resumed.epoch}{within} from {resumed.path}")
        if not built_as(optimizer, schedule.optimizer):
            log(world, f"the checkpoint's optimizer is not {schedule.optimizer}, which a "
                       f"global batch of {schedule.global_batch} takes: its momentum starts "
                       "afresh")
            optimizer = build()
    return optimizer, resumed


def preflight_passes(cfg: TrainConfig, world: World, device: torch.device) -> bool:
    """The pre-flight check; a failing job's ranks leave here, on every rank alike."""
    outcome = preflight.run(
        rank=world.rank, size=world.size, main_address=world.main_address,
        port=world.port, device=device, batch_size=cfg.batch_size,
        image_size=cfg.image_size, data_dir=None if cfg.synthetic else cfg.data_dir,
        output_dir=cfg.output_dir if world.is_main else None,
        thresholds=preflight.Thresholds.from_env(os.environ),
        log=lambda line: log(world, line))
    if outcome.passed:
        return True
    log(world, f"error: {outcome.cause}; exiting {preflight.EXIT_PREFLIGHT} before "
               "the long run", every_rank=world.is_main)
    if world.size > 1:
        # Every rank leaves together and skips the process group's teardown: a rank tearing
        # down after a peer has gone can abort (SIGABRT), and the launcher would then report
        # that instead of the pre-flight verdict.
        dist.barrier()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(preflight.EXIT_PREFLIGHT)
    return False


def train(cfg: TrainConfig, world: World, device: torch.device) -> int:
    allreduce_ok = check_allreduce(world, device)
    log(world, f"all-reduce over {world.size} rank(s): {'ok' if allreduce_ok else 'WRONG'}")
    if cfg.fail_rank == world.rank:
        log(world, f"failing as asked (--fail_rank {world.rank})", every_rank=True)
        return EXIT_FAILED_RANK
    # After an elastic restart the hosts have passed the check already.
    if (cfg.preflight and not restarted(os.environ, cfg.output_dir)
            and not preflight_passes(cfg, world, device)):
        return preflight.EXIT_PREFLIGHT
    torch.manual_seed(0)  # the same initial weights on every rank
    model = resnet50().to(device)
    global_batch = cfg.batch_size * world.size
    schedule = recipe(global_batch, cfg.epochs, cfg.lr_decay_mode, cfg.optimizer,
                      cfg.warmup_epochs, cfg.base_lr, cfg.lars_lr)
    optimizer, resumed = resume(cfg, world, model, schedule)
    start = resumed.epoch if resumed else 0
    network: nn.Module = model
    if world.size > 1:
        network = DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    steps_per_epoch = cfg.steps_per_epoch or max(1, cfg.train_images // global_batch)
    first_step = resumed.step_in(steps_per_epoch) if resumed else 0
    batches = batches_for(cfg, world, device)
    cuda = device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=cuda)
    loss_of = nn.CrossEntropyLoss(label_smoothing=cfg.label_smoothing)
    rates: list[float] = []
    epoch_seconds: list[float] = []
    steps = 0
    export = export_config(os.environ)  # each checkpoint goes to S3 as it is written
    recorder = watch.Recorder(cfg.output_dir, world, device, export)  # the curves, as it trains
    batches = recorder.timed(batches)
    resilience = Resilience(
        rank=world.rank, size=world.size, local_rank=world.local_rank,
        main_address=world.main_address, port=world.port, steps_per_epoch=steps_per_epoch,
        start=(start, first_step), hang_rank=cfg.hang_rank,
        save=(lambda e, s: save_checkpoint(cfg, e, model, optimizer, export, s,
                                           steps_per_epoch)) if world.is_main else None,
        estimate_s=checkpoint.serialize_seconds(model, optimizer) if world.is_main else 0.0,
        log=lambda line: log(world, line, every_rank=True), output_dir=cfg.output_dir,
        nodes_now=world.size // watch.node_of(world, os.environ)[1])

    def step_once(lr: float) -> torch.Tensor:
        for group in optimizer.param_groups:
            group["lr"] = lr
        images, labels = next(batches)
        with torch.autocast(device.type, dtype=torch.float16, enabled=cuda):
            loss = loss_of(network(images), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        with resilience.guard:  # a SIGTERM checkpoint never reads half-updated weights
            scaler.step(optimizer)
            scaler.update()
            resilience.advance()
        return loss.detach()  # no synchronization: the next batch is queued meanwhile

    log(world, f"training epochs {start + 1}-{cfg.epochs}, {steps_per_epoch} steps each, "
               f"global batch {global_batch}, optimizer {schedule.optimizer} "
               f"({cfg.optimizer}), peak lr {schedule.peak_lr:g} ({cfg.lr_decay_mode}, "
               f"{schedule.warmup_epochs} warmup epochs"
               f"{' by the rule' if cfg.warmup_epochs is None else ''}), weight decay "
               f"{cfg.weight_decay:g} on conv/linear weights only")
    emf = emf_started(os.environ, world.local_rank)  # CloudWatch metrics of this node
    for epoch in range(start, cfg.epochs):
        network.train()
        epoch_start = time.perf_counter()
        begin = first_step if epoch == start else 0
        with resilience.noting_a_loss():
            rates += train_epoch(cfg, world, epoch, steps_per_epoch, step_once, schedule,
                                 resilience, begin, recorder, emf)
        if resilience.termination.requested.is_set():
            log(world, "stopping on SIGTERM after the current step", every_rank=True)
            recorder.close()
            emf_stop(emf)
            return resilience.stopped()
        steps += steps_per_epoch - begin
        epoch_seconds.append(time.perf_counter() - epoch_start)
        if world.is_main:
            with resilience.checkpointing():
                saved = save_checkpoint(cfg, epoch + 1, model, optimizer, export)
            log(world, f"epoch {epoch + 1} took {epoch_seconds[-1]:.1f}s; checkpoint {saved}")
    recorder.close()
    emf_stop(emf)
    with resilience.paused("evaluate"):
        top1 = evaluate(cfg, world, model, device)
    resilience.done()
    if world.is_main:
        log(world, f"final weights {checkpoint.save_final(cfg.output_dir, model)}")
        path = write_metrics(cfg.output_dir, metrics_document(
            world_size=world.size, device=device.type, epochs=cfg.epochs, steps=steps,
            global_batch=global_batch,
            images_per_second=statistics.median(rates) if rates else 0.0,
            epoch_seconds=epoch_seconds, allreduce_ok=allreduce_ok, synthetic=cfg.synthetic,
            resumed_from=str(resumed.path) if resumed else None, top1_accuracy=top1,
            recoveries=resilience.recovery.recoveries()))
        log(world, f"wrote {path}")
    return 0 if allreduce_ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(sys.argv[1:] if argv is None else argv)
    world = detect_world(os.environ)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", world.local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    if cfg.benchmark_input:
        print(json.dumps(benchmark_input(cfg.data_dir, cfg.input_pipeline,
                                         cfg.benchmark_seconds, cfg.batch_size,
                                         cfg.image_size, device)), flush=True)
        return 0
    if world.size > 1:
        # A dead peer is an error after the timeout, not a hang: NCCL aborts the communicator
        # (asynchronous error handling), Gloo raises; elastic torchrun then restarts the ranks.
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
        dist.init_process_group("nccl" if cuda else "gloo", init_method=world.init_method,
                                rank=world.rank, world_size=world.size,
                                timeout=watchdog.collective_timeout(os.environ))
    try:
        return train(cfg, world, device)
    except data.MissingData as exc:
        log(world, f"error: {exc}", every_rank=True)
        return EXIT_NO_DATA
    except RuntimeError as exc:
        # Under torchrun no status races: the agents restart the ranks at once.
        if (world.size > 1 and "TORCHELASTIC_RUN_ID" not in os.environ
                and any(sign in str(exc) for sign in PEER_LOST_SIGNS)):
            log(world, f"a peer rank is gone ({str(exc).splitlines()[0][:200]}); failing in "
                       f"{PEER_LOST_GRACE_S:g} s, so the job ends with that rank's own status",
                every_rank=True)
            time.sleep(PEER_LOST_GRACE_S)
        raise
    finally:
        if world.size > 1 and dist.is_initialized():
            dist.destroy_process_group()
