"""The trainer's record of its in-job recoveries, for the run's goodput (metrics.json's
``recoveries``: ``traingrid_node.metrics.Recovery``).

The first rank of each node notes where the job is (rank 0's node may be the one lost): its
last completed step (as a share of the epoch, which a smaller world divides into more steps),
when, on how many nodes, and the median step time; every ``NOTE_EVERY_S`` while it trains
(a process torn down by NCCL's error handling writes nothing more), and again when a
collective fails (a peer is gone) or a SIGTERM comes (``note``). After elastic torchrun
restarts the ranks on the nodes left, the new rank 0's first completed step closes the newest
note into a recovery: ``recovery_s`` from that last step to this one (the collectives' timeout, the
re-rendezvous, the checkpoint's load, this step), ``steps_lost`` the steps between the
checkpoint it went on from and the note, ``lost_work_s`` those steps at the median step time.
The notes and the recoveries live among the outputs (``recovery/``), on the job's shared file
system, where the restarted rank 0 finds them; each names its Batch job, so another attempt's
are not this one's. Any in-job restart is one (a peer lost, or a rank's own error restarted on
the same nodes: then ``nodes_after`` equals ``nodes_before``)."""

from __future__ import annotations

import json
import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

from traingrid_node.metrics import Recovery, valid_recovery

NOTES = "recovery/interrupted-rank-*.json"
RECOVERIES = Path("recovery") / "recoveries.jsonl"
STEP_TIMES_KEPT = 50
NOTE_EVERY_S = 10.0  # a recovery's figures are at most this stale when no last note came


@dataclass(frozen=True)
class Note:
    job: str
    epoch_position: float  # epochs done, with the share of the next one
    steps_per_epoch: int
    at: float  # when that step completed (time.time())
    nodes: int
    world_size: int
    step_s: float  # median step time before the loss


def job_of(env: Mapping[str, str]) -> str:
    """The Batch job, the same on every node (a node's AWS_BATCH_JOB_ID is ``<jobId>#<k>``)."""
    job = env.get("AWS_BATCH_JOB_ID") or env.get("TORCHELASTIC_RUN_ID") or ""
    return job.partition("#")[0]


def noted(output_dir: Path, env: Mapping[str, str]) -> bool:
    """A note of this Batch job is among the outputs: its ranks were started before, so this
    is an in-job restart (every rank reads the same shared file system alike)."""
    job = job_of(env)
    for path in output_dir.glob(NOTES) if job else []:
        try:
            if json.loads(path.read_text()).get("job") == job:
                return True
        except (OSError, ValueError, AttributeError):
            continue
    return False


class RecoveryLog:
    """Each node's first rank notes (``output_dir`` None on the others: they record nothing);
    rank 0 (``closes``) closes the notes into recoveries."""

    def __init__(self, output_dir: Path | None, env: Mapping[str, str], *, rank: int,
                 closes: bool, nodes: int, world_size: int, steps_per_epoch: int,
                 resumed_position: float, restarted: bool,
                 log: Callable[[str], None] = print) -> None:
        self.output_dir, self.job, self.rank = output_dir, job_of(env), rank
        self.nodes, self.world_size, self.steps_per_epoch = nodes, world_size, steps_per_epoch
        self.resumed_position = resumed_position
        self.step_times: deque[float] = deque(maxlen=STEP_TIMES_KEPT)
        self.last: tuple[float, float] | None = None  # (epoch position, time) of the last step
        self.noted_at = 0.0
        self.log = log
        # A note of this very Batch job means its ranks were restarted: torchrun counts a
        # restart after a failure in TORCHELASTIC_RESTART_COUNT, not one after a node left.
        self.pending = self._newest_note() if closes and (restarted or self.job) else None

    def _newest_note(self) -> Note | None:
        """The newest note of this job (the others' are the same loss, seen a moment apart)."""
        notes = []
        for path in self.output_dir.glob(NOTES) if self.output_dir else []:
            try:
                notes.append(Note(**json.loads(path.read_text())))
            except (OSError, ValueError, TypeError):
                continue
        return max((n for n in notes if n.job == self.job), key=lambda n: n.at, default=None)

    def stepped(self, epoch_position: float) -> Recovery | None:
        """A step completed, now at ``epoch_position``; the recovery it closes, if any."""
        now = time.time()
        if self.last is not None:
            self.step_times.append(now - self.last[1])
        self.last = (epoch_position, now)
        closed = self._close(now) if self.pending is not None else None
        if now - self.noted_at >= NOTE_EVERY_S:
            self.note()
        return closed

    def _close(self, now: float) -> Recovery | None:
        note, self.pending = self.pending, None
        if note is None or self.output_dir is None:
            return None
        steps_lost = max(0, round((note.epoch_position - self.resumed_position)
                                  * note.steps_per_epoch))
        entry: Recovery = {
            "nodes_before": note.nodes, "nodes_after": self.nodes,
            "world_size_before": note.world_size, "world_size_after": self.world_size,
            "recovery_s": round(max(0.0, now - note.at), 3),
            "lost_work_s": round(steps_lost * note.step_s, 3), "steps_lost": steps_lost}
        try:
            with (self.output_dir / RECOVERIES).open("a") as log:
                log.write(json.dumps({"job": self.job, **entry}) + "\n")
            for path in self.output_dir.glob(NOTES):
                path.unlink(missing_ok=True)
        except OSError as error:  # the figures are the goodput's: training goes on
            self.log(f"the recovery was not recorded: {error}")
        return entry

    def note(self) -> None:
        """Note the last completed step: while training, and before the ranks go (a peer
        lost, or SIGTERM)."""
        if self.output_dir is None or self.last is None:
            return
        position, at = self.last
        note = Note(self.job, position, self.steps_per_epoch, at, self.nodes, self.world_size,
                    statistics.median(self.step_times) if self.step_times else 0.0)
        path = self.output_dir / NOTES.replace("*", str(self.rank))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.tmp")
            partial.write_text(json.dumps(asdict(note)))
            partial.replace(path)
        except OSError as error:  # never at the cost of training or a SIGTERM checkpoint
            self.log(f"where the job was not noted: {error}")
        self.noted_at = time.time()

    def recoveries(self) -> list[Recovery]:
        """This job's recoveries, in order."""
        if self.output_dir is None or not (self.output_dir / RECOVERIES).is_file():
            return []
        found: list[Recovery] = []
        try:
            lines = (self.output_dir / RECOVERIES).read_text().splitlines()
        except OSError as error:
            self.log(f"the recoveries were not read: {error}")
            return []
        for line in lines:
            try:
                entry: dict[str, Any] = json.loads(line)
            except ValueError:  # a torn line: left out, not the job's end
                continue
            if (isinstance(entry, dict) and entry.pop("job", None) == self.job
                    and valid_recovery(entry)):
                found.append(cast(Recovery, entry))
        return found
