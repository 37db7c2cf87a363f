"""The simulated week's goodput model: its failure rate from Meta's Llama 3 figures, its
Young/Daly interval, and the node-hours it charges each kind of loss."""

from __future__ import annotations

import math
import random

import pytest

from traingrid_local import bench_goodput as model


def test_the_failure_rate_is_llama3s_per_gpu_scaled_to_the_runs_gpus():
    per_gpu_hour = 419 / (54 * 24 * 16_384)
    per_node_hour = model.NODE_FAILURES_PER_S * 3600
    assert per_node_hour == pytest.approx(8 * per_gpu_hour)
    # One node's MTBF as the trainer assumes it (54 days × 2,048 nodes / 419).
    node_mtbf_h = 1 / model.NODE_FAILURES_PER_S / 3600
    assert node_mtbf_h == pytest.approx(54 * 24 * 2048 / 419)
    # 20 nodes writing a checkpoint in 10 s: one every ~80 minutes.
    interval = model.interval_s(20)
    assert interval == pytest.approx(math.sqrt(2 * 10 * 54 * 24 * 2048 / 419 / 20 * 3600))
    assert 79 * 60 < model.interval_s(20) < 81 * 60


class Draws(random.Random):
    """Losses at given times (seconds after the previous event) and nodes, then none."""

    def __init__(self, gaps, nodes):
        super().__init__(0)
        self.gaps, self.nodes = list(gaps), list(nodes)

    def expovariate(self, lambd):
        return self.gaps.pop(0) if self.gaps else math.inf

    def randrange(self, *args, **kwargs):
        return self.nodes.pop(0)


def test_a_worker_loss_costs_recovery_and_the_work_since_the_checkpoint_on_fewer_nodes():
    start = model.BOOT_S + model.PULL_S + model.MOUNT_S + model.PREFLIGHT_S
    week = model.replay(Draws([1000.0], [5]))  # node 5 (a worker), 1000 s into training
    assert (week.worker_losses, week.main_losses) == (1, 0)
    assert week.lost["lost_work"] == 20 * 1000.0
    assert week.lost["recovery"] == 19 * model.RECOVERY_S
    assert week.lost["boot"] == 20 * (model.BOOT_S + model.PULL_S + model.MOUNT_S)
    assert week.lost["preflight"] == 20 * model.PREFLIGHT_S
    # Every second of the week is paid on the nodes it had: 20 until the loss, 19 after.
    assert week.paid == pytest.approx(20 * (start + 1000) + 19 * (model.WEEK_S - start - 1000),
                                      rel=1e-9)
    assert week.goodput == pytest.approx(
        (week.paid - sum(week.lost.values())) / week.paid)


def test_a_main_node_loss_is_a_new_attempt_on_all_the_plans_nodes():
    week = model.replay(Draws([1000.0], [0]))  # node 0: the main node
    assert (week.worker_losses, week.main_losses) == (0, 1)
    assert week.lost["lost_work"] == 20 * 1000.0
    assert week.lost["boot"] == 2 * 20 * (model.BOOT_S + model.PULL_S + model.MOUNT_S)
    assert week.lost["recovery"] == 20 * model.LOAD_S


def test_the_simulated_week_meets_its_goal_and_beats_resubmitting_every_loss():
    found = model.measure(weeks=200)
    assert found["goodput_mean"] >= model.GOAL
    assert found["resubmit_every_loss"]["goodput_mean"] <= found["goodput_mean"]
    assert model.goals({"goodput": {"simulated_week": found}})[
        "goodput, simulated 160-GPU week (1 − goodput)"]["met"] is True
