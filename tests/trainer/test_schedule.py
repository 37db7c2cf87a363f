import math

import pytest

from traingrid_trainer.schedule import DECAY_MODES, Schedule


def test_the_peak_rate_scales_with_the_global_batch() -> None:
    assert Schedule(0.1, 256, 90, 5, "poly").peak_lr == pytest.approx(0.1)
    assert Schedule(0.1, 8 * 256, 90, 5, "poly").peak_lr == pytest.approx(0.8)
    assert Schedule(0.1, 64, 90, 5, "poly").peak_lr == pytest.approx(0.025)


def test_warmup_rises_linearly_from_the_base_rate_to_the_peak() -> None:
    schedule = Schedule(0.1, 2048, 90, 10, "cosine")
    assert schedule.lr(0) == pytest.approx(0.1)
    assert schedule.lr(5) == pytest.approx(0.1 + (0.8 - 0.1) / 2)
    assert schedule.lr(10) == pytest.approx(0.8)


@pytest.mark.parametrize("mode", DECAY_MODES)
def test_every_mode_decays_from_the_peak_without_rising(mode: str) -> None:
    schedule = Schedule(0.1, 1024, 90, 5, mode)
    rates = [schedule.lr(5 + i * 85 / 200) for i in range(201)]
    assert rates[0] == pytest.approx(schedule.peak_lr)
    assert all(later <= earlier + 1e-12 for earlier, later in zip(rates, rates[1:], strict=False))
    assert rates[-1] < schedule.peak_lr * 0.01


def test_modes_have_their_documented_shapes() -> None:
    halfway = 5 + 85 / 2
    assert Schedule(0.1, 256, 90, 5, "linear").lr(halfway) == pytest.approx(0.05)
    assert Schedule(0.1, 256, 90, 5, "poly").lr(halfway) == pytest.approx(0.025)
    assert Schedule(0.1, 256, 90, 5, "cosine").lr(halfway) == pytest.approx(0.05)
    step = Schedule(0.1, 256, 90, 0, "step")
    assert [step.lr(e) for e in (29, 30, 60, 80)] == pytest.approx([0.1, 0.01, 0.001, 0.0001])


def test_the_rate_is_clamped_outside_the_run() -> None:
    schedule = Schedule(0.1, 256, 10, 2, "poly")
    assert schedule.lr(-1) == schedule.lr(0)
    assert schedule.lr(11) == schedule.lr(10) == 0
    assert all(math.isfinite(schedule.lr(e / 10)) for e in range(101))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"decay_mode": "exponential"}, "decay mode must be one of poly, cosine, step, linear"),
    ({"warmup_epochs": 90}, "warmup epochs (90) must be fewer than epochs (90)"),
])
def test_a_wrong_schedule_is_refused_with_its_reason(kwargs: dict, message: str) -> None:
    fields = {"base_lr": 0.1, "global_batch": 256, "epochs": 90, "warmup_epochs": 5,
              "decay_mode": "poly", **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Schedule(**fields)
