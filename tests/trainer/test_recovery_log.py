"""The trainer's record of an in-job recovery (``traingrid_trainer.recovery``), without
processes: a node's first rank notes where the job was when a collective failed; the restarted
rank 0's first step closes the newest note into metrics.json's ``recoveries``."""

from __future__ import annotations

import json
import time
from pathlib import Path

from traingrid_node.metrics import metrics_document, problems
from traingrid_trainer.recovery import NOTE_EVERY_S, RecoveryLog

JOB = {"AWS_BATCH_JOB_ID": "job-1#0"}  # a node's id: the job's, then its node


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
    before.note()
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
    # The old world's notes are gone; the new world keeps its own.
    (note,) = (tmp_path / "recovery").glob("interrupted-*")
    assert note.name == "interrupted-rank-0.json" and json.loads(note.read_text())["nodes"] == 2
    document = metrics_document(
        world_size=16, device="cpu", epochs=1, steps=5, global_batch=32,
        images_per_second=1.0, epoch_seconds=[1.0], allreduce_ok=True, synthetic=True,
        recoveries=after.recoveries())
    assert problems(document) == []


def test_the_lost_work_is_the_lost_steps_at_the_median_step_time(tmp_path, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    before = log_of(tmp_path, env={"AWS_BATCH_JOB_ID": "job-1#2"})  # node 2's first rank
    for step in range(1, 21):
        now[0] = 2.0 * step  # a step every 2 s
        before.stepped(step / 100)
    before.note()  # noted at step 20, completed at t = 40
    now[0] = 100.0
    after = log_of(tmp_path, restarted=True, resumed=0.15)  # node 0's, the same job
    recovery = after.stepped(0.16)
    assert recovery is not None
    assert recovery["steps_lost"] == 5
    assert recovery["lost_work_s"] == 10.0
    assert recovery["recovery_s"] == 60.0


def test_a_note_is_kept_while_training_for_a_rank_that_dies_without_a_word(
        tmp_path, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(time, "time", lambda: now[0])
    before = log_of(tmp_path)
    for step in range(1, 31):
        now[0] = float(step)
        before.stepped(step / 100)
    # Torn down at t = 30 with no last note: the one of at most NOTE_EVERY_S ago stands.
    now[0] = 90.0
    recovery = log_of(tmp_path, restarted=True, resumed=0.0).stepped(0.01)
    assert recovery is not None
    assert 20 <= recovery["steps_lost"] <= 30
    assert 60.0 <= recovery["recovery_s"] <= 60.0 + NOTE_EVERY_S


def test_a_torn_line_of_the_recoveries_is_left_out(tmp_path):
    log = log_of(tmp_path)
    (tmp_path / "recovery").mkdir()
    (tmp_path / "recovery" / "recoveries.jsonl").write_text('{"job": "job-1", "nodes_bef\n')
    assert log.recoveries() == []


def test_another_jobs_note_and_a_first_start_are_not_recoveries(tmp_path):
    other = log_of(tmp_path, env={"AWS_BATCH_JOB_ID": "job-0"})
    other.stepped(0.1)
    other.note()
    assert log_of(tmp_path, restarted=True).stepped(0.2) is None  # job-1 restarted: not its note
    # Without a job's id, only a restart torchrun counted reads a note.
    anonymous = log_of(tmp_path, env={})
    anonymous.stepped(0.1)
    anonymous.note()
    assert log_of(tmp_path, env={}, restarted=False).stepped(0.2) is None
    assert log_of(tmp_path).recoveries() == []


def test_a_restart_torchrun_did_not_count_is_one_all_the_same(tmp_path):
    # After a node leaves, the agents meet again without counting a restart
    # (TORCHELASTIC_RESTART_COUNT stays 0): a note of this same Batch job says it was one.
    before = log_of(tmp_path)
    before.stepped(0.1)
    before.note()
    recovery = log_of(tmp_path, restarted=False, nodes=2).stepped(0.11)
    assert recovery is not None and recovery["nodes_after"] == 2


def test_ranks_without_an_output_dir_record_nothing(tmp_path):
    quiet = RecoveryLog(None, JOB, rank=1, closes=False, nodes=3, world_size=3,
                        steps_per_epoch=10, resumed_position=0.0, restarted=True)
    quiet.stepped(0.1)
    quiet.note()
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


def test_a_note_of_this_job_says_the_ranks_were_restarted_so_preflight_is_not_run_again(
        tmp_path):
    from traingrid_trainer.resilience import restarted

    assert not restarted(JOB, tmp_path)
    log = log_of(tmp_path)
    log.stepped(0.1)  # notes where the job is
    assert restarted(JOB, tmp_path)
    assert not restarted({"AWS_BATCH_JOB_ID": "job-2#0"}, tmp_path)  # another attempt
    assert restarted({"TORCHELASTIC_RESTART_COUNT": "1"})
