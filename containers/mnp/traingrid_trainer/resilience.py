"""What the training loop does for the job's goodput, in one place: report every step to the
watchdog (``watchdog``), write a mid-epoch checkpoint when the Young/Daly interval has passed
(``checkpoint.Interval``), write one and stop on SIGTERM (``termination``), and go on from a
mid-epoch checkpoint after a restart. ``--hang_rank K`` makes rank K stop stepping (the
watchdog's fault injection, as ``--fail_rank`` is the launcher's)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from traingrid_trainer import checkpoint, recovery, watchdog
from traingrid_trainer.recovery import RecoveryLog
from traingrid_trainer.termination import Termination

HANG_AFTER_STEPS = 2  # --hang_rank: steps the rank trains before it stops


def restarted(env: Mapping[str, str], output_dir: Path | None = None) -> bool:
    """Elastic torchrun restarted the workers (a node was lost): the hosts passed pre-flight.
    torchrun counts a restart after a failure; one after a node left its rendezvous shows as
    this job's note among the outputs (``recovery.noted``)."""
    counted = env.get("TORCHELASTIC_RESTART_COUNT", "0") not in ("", "0")
    return counted or (output_dir is not None and recovery.noted(output_dir, env))


def job_mtbf_s(env: Mapping[str, str], nodes: int) -> float:
    hours = watchdog.seconds_from(env, "TRAINGRID_NODE_MTBF_HOURS",
                                  checkpoint.DEFAULT_NODE_MTBF_HOURS)
    return checkpoint.job_mtbf_s(hours, nodes)


class Resilience:
    """One per training run; ``save(epoch, step)`` writes rank 0's checkpoint."""

    def __init__(self, *, rank: int, size: int, local_rank: int, main_address: str, port: int,
                 steps_per_epoch: int, start: tuple[int, int], hang_rank: int | None,
                 save: Callable[[int, int], Path] | None, estimate_s: float,
                 log: Callable[[str], None], env: Mapping[str, str] = os.environ,
                 output_dir: Path | None = None, nodes_now: int = 1) -> None:
        self.rank, self.steps_per_epoch = rank, steps_per_epoch
        self.epoch, self.step = start  # the last completed step: epochs done, steps into next
        self.hang_rank, self.save, self.log = hang_rank, save, log
        self.steps_run = 0
        # Each node's first rank notes a loss; rank 0 records the job's in-job recoveries.
        self.recovery = RecoveryLog(
            output_dir if local_rank == 0 else None, env, rank=rank, closes=save is not None,
            nodes=nodes_now, world_size=size, steps_per_epoch=steps_per_epoch,
            resumed_position=self.epoch_position(), restarted=restarted(env), log=log)
        nodes = int(env.get("TRAINGRID_NUM_NODES") or env.get("AWS_BATCH_JOB_NUM_NODES") or 1)
        self.interval = (checkpoint.Interval(job_mtbf_s(env, nodes), estimate_s)
                         if save is not None else None)
        if self.interval is not None:
            log(f"checkpoint interval {self.interval.seconds:.0f} s (Young/Daly: job MTBF "
                f"{self.interval.mtbf_s / 3600:.1f} h over {nodes} node(s), checkpoint "
                f"{self.interval.measured[-1]:.2f} s to serialize; re-measured at each write)")
        self.termination = Termination(
            (lambda: save(*self.position())) if save is not None else None, log,
            on_stop=self.recovery.note)
        self.termination.install()
        self.monitor = watchdog.start(rank, size, local_rank, main_address, port, env)

    @contextlib.contextmanager
    def noting_a_loss(self) -> Iterator[None]:
        """Around the steps: a collective that fails (a peer is gone) is noted, then raised."""
        try:
            yield
        except RuntimeError:
            self.recovery.note()
            raise

    def epoch_position(self) -> float:
        return self.epoch + self.step / self.steps_per_epoch

    @property
    def guard(self) -> threading.Lock:
        return self.termination.guard

    def position(self) -> tuple[int, int]:
        if self.step >= self.steps_per_epoch:
            return self.epoch + 1, 0
        return self.epoch, self.step

    def global_step(self) -> int:
        epoch, step = self.position()
        return epoch * self.steps_per_epoch + step

    def before_step(self, epoch: int, step: int) -> None:
        """Step ``step`` (0-based) of epoch ``epoch`` is about to start."""
        self.epoch, self.step = epoch, step
        if self.hang_rank == self.rank and self.steps_run == HANG_AFTER_STEPS:
            self._hang_as_asked()
        self.monitor.step(self.global_step())

    def _hang_as_asked(self) -> None:
        self.log(f"hanging as asked (--hang_rank {self.rank}): no more steps")
        while not self.termination.requested.is_set():
            time.sleep(1.0)

    def advance(self) -> None:
        """Under ``guard``, right after the optimizer's update: the step is complete."""
        self.step += 1
        self.steps_run += 1

    def after_step(self) -> bool:
        """After a completed step: True to stop (SIGTERM); a checkpoint when one is due."""
        if recovered := self.recovery.stepped(self.epoch_position()):
            self.log(f"recovered in the job: {recovered['nodes_before']} → "
                     f"{recovered['nodes_after']} node(s), {recovered['recovery_s']:.1f} s from "
                     f"the last step before the loss, {recovered['steps_lost']} step(s) trained "
                     "again")
        if self.termination.requested.is_set():
            return True
        if (self.interval is not None and self.save is not None
                and self.step < self.steps_per_epoch and self.interval.due()):
            with self.checkpointing() as timed:
                path = self.save(*self.position())
            self.log(f"checkpoint {path} after {timed():.2f} s; next in "
                     f"{self.interval.seconds:.0f} s (Young/Daly)")
        return False

    @contextlib.contextmanager
    def checkpointing(self) -> Iterator[Callable[[], float]]:
        """Time a checkpoint (the interval learns from it), paused for the watchdog."""
        started = time.perf_counter()
        took = 0.0
        with self.monitor.paused("checkpoint", self.global_step()), self.guard:
            yield lambda: took
        took = time.perf_counter() - started
        if self.interval is not None:
            self.interval.wrote(took)

    def paused(self, phase: str) -> contextlib.AbstractContextManager[None]:
        return self.monitor.paused(phase, self.global_step())

    def stopped(self) -> int:
        """The exit status after the loop stopped on SIGTERM (rank 0 waits for its save)."""
        return self.termination.finish()

    def done(self) -> None:
        self.monitor.done(self.global_step())
