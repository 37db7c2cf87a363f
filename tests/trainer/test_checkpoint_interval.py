"""The checkpoint interval (Young/Daly, from the measured write time and the job's expected
time between failures) and mid-epoch checkpoints that a restart goes on from."""

from __future__ import annotations

import math

import pytest
import torch

from traingrid_trainer import checkpoint


def test_the_interval_is_young_dalys_square_root_of_twice_the_write_time_by_the_mtbf() -> None:
    assert checkpoint.young_daly_interval(2.0, 3600.0) == pytest.approx(120.0)
    # Four times the write time, or four times the failures: twice as long, half as long.
    assert checkpoint.young_daly_interval(8.0, 3600.0) == pytest.approx(240.0)
    assert checkpoint.young_daly_interval(2.0, 900.0) == pytest.approx(60.0)
    with pytest.raises(ValueError):
        checkpoint.young_daly_interval(0.0, 3600.0)


def test_a_job_fails_as_often_as_all_its_nodes_together() -> None:
    # Meta's Llama 3 figure: 419 interruptions in 54 days on 2,048 8-GPU nodes.
    assert round(checkpoint.DEFAULT_NODE_MTBF_HOURS, 1) == 6334.6
    assert checkpoint.job_mtbf_s(6334.6, 20) == pytest.approx(6334.6 * 3600 / 20)
    # 20 nodes, a 10 s checkpoint: one every 80 minutes.
    interval = checkpoint.young_daly_interval(10.0, checkpoint.job_mtbf_s(6334.6, 20))
    assert 79 * 60 < interval < 80 * 60


def test_the_interval_learns_from_each_write() -> None:
    now = [0.0]
    interval = checkpoint.Interval(mtbf_s=100.0, estimate_s=0.5, clock=lambda: now[0])
    assert interval.seconds == pytest.approx(10.0)  # from the in-memory estimate
    now[0] = 9.9
    assert not interval.due()
    now[0] = 10.0
    assert interval.due()
    interval.wrote(2.0)  # the real write took longer: the estimate is dropped
    assert interval.seconds == pytest.approx(20.0) and not interval.due()
    now[0] = 30.0
    assert interval.due()
    assert math.isclose(interval.measured[-1], 2.0)


def test_a_mid_epoch_checkpoint_is_the_newest_and_resumes_into_its_epoch(tmp_path) -> None:
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    checkpoint.save(tmp_path, 1, model, optimizer)
    for step in range(1, 6):
        with torch.no_grad():
            model.weight.fill_(step)
        checkpoint.save(tmp_path, 1, model, optimizer, step * 10, 100)
    names = sorted(p.name for p in tmp_path.glob("epoch-*.pt"))
    assert names == ["epoch-0001-step-000030.pt", "epoch-0001-step-000040.pt",
                     "epoch-0001-step-000050.pt", "epoch-0001.pt"]
    fresh = torch.nn.Linear(2, 2)
    resumed = checkpoint.resume(tmp_path, fresh, torch.optim.SGD(fresh.parameters(), lr=0.1))
    assert resumed is not None and (resumed.epoch, resumed.step) == (1, 50)
    assert torch.equal(fresh.weight, torch.full((2, 2), 5.0))
    # Fewer nodes after a loss: more steps to an epoch, the same share of it done.
    assert resumed.step_in(100) == 50 and resumed.step_in(150) == 75
    # The next epoch's checkpoint is newer than any step of the one before.
    checkpoint.save(tmp_path, 2, model, optimizer)
    assert checkpoint.newest(tmp_path) == tmp_path / "epoch-0002.pt"
