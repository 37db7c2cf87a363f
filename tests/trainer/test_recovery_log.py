"""The trainer's record of an in-job recovery (``traingrid_trainer.recovery``), without
processes: a node's first rank notes where the job was when a collective failed; the restarted
rank 0's first step closes the newest note into metrics.json's ``recoveries``."""

from __future__ import annotations

import json
import time
from pathlib import Path

from traingrid_node.metrics import metrics_document, problems
from traingrid_trainer.recovery import RecoveryLog

JOB = {"AWS_BATCH_JOB_ID": "job-1"}


def log_of(output: Path, *, rank: int = 0, restarted: bool = False, nodes: int = 3,
           world: int = 24, steps_per_epoch: int = 100, resumed: float = 0.0,
           env: dict[str, str] = JOB) -> RecoveryLog:
    return RecoveryLog(output, env, rank=rank, closes=rank == 0, nodes=nodes,
                       world_size=world, steps_per_epoch=steps_per_epoch,
                       resumed_position=resumed, restarted=restarted)


def test_a_loss_noted_before_the_restart_is_closed_by_the_first_step_after_it(tmp_path):
    before = log_of(tmp_path, rank=8)  # node 1's first rank: rank 0's node may be the lost one
    for step in range(1, 41):
        before.stepped(step / 100)
    before.interrupted()
    # Restarted on 2 nodes (16 ranks), from the checkpoint at 30% of the epoch, which the
    # smaller world divides into 150 steps.
    after = log_of(tmp_path, restarted=True, nodes=2, world=16, steps_per_epoch=150,
                   resumed=0.30)
    recovery = after.stepped(0.30 + 1 / 150)
    assert recovery is not None
    assert recovery["steps_lost"] == 10  # 40% noted, 30% gone on from, at 100 steps an epoch
    assert (recovery["nodes_before"], recovery["nodes_after"]) == (3, 2)
    assert (recovery["world_size_before"], recovery["world_size_after"]) == (24, 16)
    assert recovery["recovery_s"] >= 0
    assert recovery["lost_work_s"] >= 0
    assert after.stepped(0.30 + 2 / 150) is None  # closed once
    assert after.recoveries() == [recovery]
    assert list((tmp_path / "recovery").glob("interrupted-*")) == []
    document = metrics_document(
        world_size=16, device="cpu", epochs=1, steps=5, global_batch=32,
        images_per_second=1.0, epoch_seconds=[1.0], allreduce_ok=True, synthetic=True,
        recoveries=after.recoveries())
    assert problems(document) == []


def test_the_lost_work_is_the_lost_steps_at_the_median_step_time(tmp_path, monkeypatch):
    clock = iter(float(t) for t in range(0, 1000, 2))  # a step every 2 s
    monkeypatch.setattr(time, "time", lambda: next(clock))
    before = log_of(tmp_path)
    for step in range(1, 21):
        before.stepped(step / 100)
    before.interrupted()  # noted at step 20, completed at t = 38
    after = log_of(tmp_path, restarted=True, resumed=0.15)
    recovery = after.stepped(0.16)  # at t = 40
    assert recovery is not None
    assert recovery["steps_lost"] == 5
    assert recovery["lost_work_s"] == 10.0
    assert recovery["recovery_s"] == 2.0


def test_another_jobs_note_and_a_first_start_are_not_recoveries(tmp_path):
    other = log_of(tmp_path, env={"AWS_BATCH_JOB_ID": "job-0"})
    other.stepped(0.1)
    other.interrupted()
    assert log_of(tmp_path, restarted=True).stepped(0.2) is None  # job-1 restarted: not its note
    mine = log_of(tmp_path)
    mine.stepped(0.1)
    mine.interrupted()
    assert log_of(tmp_path, restarted=False).stepped(0.2) is None  # a new start, not a restart
    assert log_of(tmp_path).recoveries() == []


def test_ranks_without_an_output_dir_record_nothing(tmp_path):
    quiet = RecoveryLog(None, JOB, rank=1, closes=False, nodes=3, world_size=3,
                        steps_per_epoch=10, resumed_position=0.0, restarted=True)
    quiet.stepped(0.1)
    quiet.interrupted()
    assert quiet.recoveries() == []
    assert not (tmp_path / "recovery").exists()


def test_metrics_refuse_a_recovery_without_its_figures():
    document = metrics_document(
        world_size=2, device="cpu", epochs=1, steps=5, global_batch=4, images_per_second=1.0,
        epoch_seconds=[1.0], allreduce_ok=True, synthetic=True)
    assert problems(document) == []
    broken = dict(document, recoveries=[{"nodes_before": 3, "recovery_s": -1}])
    assert [p for p in problems(broken) if p.startswith("recoveries must be")]
    json.dumps(document)
