"""The large-batch recipe: which optimizer, warmup and rate a global batch gets, LARS's update,
the parameters it exempts, its checkpoint, and a few real steps."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tests.trainer.conftest import run_trainer
from traingrid_trainer import checkpoint
from traingrid_trainer.config import parse_args
from traingrid_trainer.optim import LARS, build_optimizer, parameter_groups
from traingrid_trainer.schedule import (
    LARS_ABOVE,
    Schedule,
    choose_optimizer,
    recipe,
    warmup_epochs_for,
)

SEEDS_BATCH = 20 * 8 * 256  # the seeds' 20 p3.16xlarge nodes, 256 images per GPU


def small_net(classes: int = 3) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, classes))


def test_auto_chooses_lars_above_8192_images_a_step() -> None:
    assert LARS_ABOVE == 8192
    assert choose_optimizer("auto", 8192) == "sgd"
    assert choose_optimizer("auto", 8193) == "lars"
    assert choose_optimizer("auto", SEEDS_BATCH) == "lars"
    assert choose_optimizer("sgd", SEEDS_BATCH) == "sgd"
    assert choose_optimizer("lars", 256) == "lars"
    with pytest.raises(ValueError, match="optimizer must be one of auto, sgd, lars"):
        choose_optimizer("adam", 256)


@pytest.mark.parametrize(("batch", "warmup"), [
    (256, 0), (2048, 5), (8192, 5), (16_384, 5), (32_767, 5), (32_768, 25), (SEEDS_BATCH, 25)])
def test_the_warmup_grows_with_the_batch(batch: int, warmup: int) -> None:
    assert warmup_epochs_for(batch, 90) == warmup


def test_the_warmup_rule_never_takes_more_than_half_the_run() -> None:
    assert warmup_epochs_for(SEEDS_BATCH, 30) == 15
    assert warmup_epochs_for(SEEDS_BATCH, 1) == 0


def test_the_learning_rate_rule_at_each_scale() -> None:
    # Linear scaling up to 8k (Goyal et al.): 0.1 per 256 images, warmed up from 0.1.
    sgd = recipe(8192, 90, "poly")
    assert (sgd.optimizer, sgd.warmup_epochs) == ("sgd", 5)
    assert (sgd.start_lr, sgd.peak_lr) == pytest.approx((0.1, 3.2))
    assert sgd.lr(2.5) == pytest.approx(0.1 + (3.2 - 0.1) / 2)
    # Above 8k: LARS at the MLPerf reference's rate for the batch, warmed up from 0, poly.
    assert [recipe(b, 90, "poly").peak_lr for b in (8200, 16_384, 32_768, SEEDS_BATCH)] == [
        10.0, 25.0, 31.2, 31.2]
    lars = recipe(SEEDS_BATCH, 90, "poly")
    assert (lars.optimizer, lars.warmup_epochs, lars.start_lr) == ("lars", 25, 0.0)
    assert lars.lr(12.5) == pytest.approx(15.6)
    assert lars.lr(25 + 65 / 2) == pytest.approx(31.2 * 0.25)
    assert lars.lr(90) == 0
    # What the job sets wins.
    explicit = recipe(SEEDS_BATCH, 90, "cosine", "sgd", warmup_epochs=10, base_lr=0.2)
    assert (explicit.optimizer, explicit.warmup_epochs) == ("sgd", 10)
    assert explicit.peak_lr == pytest.approx(0.2 * 160)
    assert recipe(SEEDS_BATCH, 90, "poly", lars_lr=20.0).peak_lr == 20.0


def test_a_wrong_schedule_lists_every_problem() -> None:
    with pytest.raises(ValueError) as error:
        Schedule(0.1, 256, 5, 5, "exponential", "adam")
    assert str(error.value).count("must be") == 3


def test_the_flags_and_the_job_environment_choose_the_recipe() -> None:
    cfg = parse_args([], {})
    assert (cfg.optimizer, cfg.warmup_epochs, cfg.lars_lr) == ("auto", None, None)
    assert parse_args([], {"WARMUP_EPOCHS": "auto"}).warmup_epochs is None
    assert parse_args([], {"WARMUP_EPOCHS": "10"}).warmup_epochs == 10
    cfg = parse_args(["--optimizer", "lars", "--lars_lr", "12", "--warmup_epochs", "3",
                      "--lars_trust_coefficient", "0.002"], {"WARMUP_EPOCHS": "10"})
    assert (cfg.optimizer, cfg.lars_lr, cfg.warmup_epochs, cfg.trust_coefficient) == (
        "lars", 12.0, 3, 0.002)


def test_batchnorm_and_biases_are_neither_decayed_nor_adapted() -> None:
    model = small_net()
    conv, bn, linear = model[0], model[1], model[5]
    decayed, exempt = parameter_groups(model, 1e-4)
    assert (decayed["weight_decay"], decayed["adapt"]) == (1e-4, True)
    assert (exempt["weight_decay"], exempt["adapt"]) == (0.0, False)
    assert {id(p) for p in decayed["params"]} == {id(conv.weight), id(linear.weight)}
    assert {id(p) for p in exempt["params"]} == {
        id(conv.bias), id(bn.weight), id(bn.bias), id(linear.bias)}
    for name in ("sgd", "lars"):
        groups = build_optimizer(name, model, 0.1, 0.9, 1e-4).param_groups
        assert [g["weight_decay"] for g in groups] == [1e-4, 0.0]


def test_sgd_leaves_batchnorm_untouched_by_decay() -> None:
    """A zero gradient: only weight decay moves a parameter, and only the weights move."""
    model = small_net()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = build_optimizer("sgd", model, 0.1, 0.9, 0.5)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    moved = {name for name, p in model.named_parameters() if not torch.equal(p, before[name])}
    assert moved == {"0.weight", "5.weight"}


def test_a_lars_step_matches_the_update_worked_by_hand() -> None:
    layer = nn.Linear(2, 1)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[3.0, 4.0]]))  # |w| = 5
        layer.bias.fill_(1.0)
    lr, momentum, decay, eta = 2.0, 0.9, 0.01, 0.001
    optimizer = LARS(parameter_groups(layer, decay), lr=lr, momentum=momentum,
                     trust_coefficient=eta)
    layer.weight.grad = torch.tensor([[0.6, 0.8]])  # |g| = 1
    layer.bias.grad = torch.tensor([0.5])
    optimizer.step()
    trust = eta * 5 / (1 + decay * 5)
    v_w = [lr * trust * (0.6 + decay * 3), lr * trust * (0.8 + decay * 4)]
    v_b = lr * 0.5  # no trust ratio, no decay
    assert layer.weight[0].tolist() == pytest.approx([3 - v_w[0], 4 - v_w[1]])
    assert layer.bias.tolist() == pytest.approx([1 - v_b])

    # The second step adds to the momentum buffers.
    w = layer.weight.detach().clone()[0].tolist()
    layer.weight.grad = torch.tensor([[0.6, 0.8]])
    layer.bias.grad = torch.tensor([0.5])
    optimizer.step()
    w_norm = math.hypot(*w)
    trust = eta * w_norm / (1 + decay * w_norm)
    v_w = [momentum * v_w[i] + lr * trust * (g + decay * w[i]) for i, g in enumerate((0.6, 0.8))]
    assert layer.weight[0].tolist() == pytest.approx([w[0] - v_w[0], w[1] - v_w[1]])
    assert layer.bias.tolist() == pytest.approx([1 - v_b - (momentum * v_b + v_b)])


def test_a_zero_weight_or_gradient_gets_a_trust_ratio_of_one() -> None:
    layer = nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        layer.weight.zero_()
    optimizer = LARS(layer.parameters(), lr=0.5, momentum=0.0, weight_decay=0.1)
    layer.weight.grad = torch.tensor([[1.0, 2.0]])
    optimizer.step()
    assert layer.weight[0].tolist() == pytest.approx([-0.5, -1.0])


def test_lars_refuses_every_negative_setting_at_once() -> None:
    with pytest.raises(ValueError) as error:
        LARS(nn.Linear(1, 1).parameters(), lr=-1, momentum=-0.9, weight_decay=-1)
    assert str(error.value).count("must be at least 0") == 3


def separable_batches(steps: int, batch: int = 32) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each class brightens its own colour channel: learnable in a few steps."""
    generator = torch.Generator().manual_seed(1)
    out = []
    for _ in range(steps):
        labels = torch.randint(0, 3, (batch,), generator=generator)
        images = torch.randn(batch, 3, 8, 8, generator=generator) * 0.5
        images[torch.arange(batch), labels] += 1.0
        out.append((images, labels))
    return out


def train_steps(model: nn.Module, optimizer: torch.optim.Optimizer, schedule: Schedule,
                batches: list[tuple[torch.Tensor, torch.Tensor]], steps_per_epoch: int,
                first_step: int = 0) -> list[float]:
    losses = []
    loss_of = nn.CrossEntropyLoss()
    for step, (images, labels) in enumerate(batches, start=first_step):
        for group in optimizer.param_groups:
            group["lr"] = schedule.lr(step / steps_per_epoch)
        loss = loss_of(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses


def test_real_lars_steps_on_the_cpu_reduce_the_loss() -> None:
    torch.manual_seed(0)
    model = small_net()
    schedule = recipe(SEEDS_BATCH, 6, "poly", "auto")  # LARS, 3 warmup epochs, peak 31.2
    assert (schedule.optimizer, schedule.warmup_epochs) == ("lars", 3)
    optimizer = build_optimizer(schedule.optimizer, model, schedule.start_lr, 0.9, 1e-4)
    losses = train_steps(model, optimizer, schedule, separable_batches(30), 10)
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.5 * first, losses


def test_a_lars_checkpoint_resumes_the_identical_optimizer_state(tmp_path) -> None:
    schedule = recipe(SEEDS_BATCH, 4, "poly", "lars")
    batches = separable_batches(8)

    def fresh() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        model = small_net()
        return model, build_optimizer("lars", model, 0.0, 0.9, 1e-4)

    model, optimizer = fresh()
    train_steps(model, optimizer, schedule, batches[:4], 4)
    checkpoint.save(tmp_path, 1, model, optimizer)
    train_steps(model, optimizer, schedule, batches[4:], 4, first_step=4)

    resumed_model, resumed_optimizer = fresh()
    assert checkpoint.resume(tmp_path, resumed_model, resumed_optimizer).epoch == 1
    assert isinstance(resumed_optimizer, LARS)
    saved = torch.load(tmp_path / "epoch-0001.pt", weights_only=True)["optimizer"]
    reloaded = resumed_optimizer.state_dict()
    assert reloaded["param_groups"] == saved["param_groups"]
    assert reloaded["param_groups"][1]["adapt"] is False
    for index, state in saved["state"].items():
        assert torch.equal(reloaded["state"][index]["momentum_buffer"], state["momentum_buffer"])
    # The resumed run takes exactly the steps the uninterrupted one took.
    train_steps(resumed_model, resumed_optimizer, schedule, batches[4:], 4, first_step=4)
    for a, b in zip(model.parameters(), resumed_model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_the_trainer_trains_resnet50_with_lars_and_resumes_it_with_sgd(tmp_path) -> None:
    """As after an attempt on fewer nodes, whose global batch takes the other optimizer."""
    output = tmp_path / "run"
    tiny = ["--synthetic", "--image_size", "32", "-b", "2", "--log_every", "1",
            "--loader_workers", "0", "--steps_per_epoch", "1", "--output_dir", str(output)]
    first = run_trainer([*tiny, "--num_epochs", "1", "--optimizer", "lars"])
    assert first.returncode == 0, first.stderr
    assert "optimizer lars (lars), peak lr 10 (poly, 0 warmup epochs by the rule)" in first.stdout
    saved = torch.load(output / "checkpoints" / "epoch-0001.pt", weights_only=True)
    groups = saved["optimizer"]["param_groups"]
    assert [(g["adapt"], g["weight_decay"]) for g in groups] == [(True, 1e-4), (False, 0.0)]
    # ResNet-50's 54 convolution and linear weights; its 53 BatchNorms' 106 and the fc bias.
    assert [len(g["params"]) for g in groups] == [54, 107]

    second = run_trainer([*tiny, "--num_epochs", "2"])
    assert second.returncode == 0, second.stderr
    assert "optimizer sgd (auto)" in second.stdout
    assert ("the checkpoint's optimizer is not sgd, which a global batch of 2 takes: its "
            "momentum starts afresh") in second.stdout
    groups = torch.load(output / "checkpoints" / "epoch-0002.pt",
                        weights_only=True)["optimizer"]["param_groups"]
    assert [g["optimizer"] for g in groups] == ["sgd", "sgd"]
