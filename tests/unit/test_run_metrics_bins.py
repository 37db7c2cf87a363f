"""A run's curves stay inside Lambda's 6 MB response whatever step is asked for."""

from __future__ import annotations

import json

from traingrid.runs.metrics import MAX_ASKED_BINS, MetricsQuery, curves
from traingrid.runs.node_series import parse_all


def node_file(seconds: int) -> str:
    return "\n".join(json.dumps({"t": 1_800_000_000 + t, "step": t, "loss": 1.0 / (1 + t),
                                 "images_per_s": 100.0, "step_s": 0.5})
                     for t in range(seconds)) + "\n"


def test_a_step_too_fine_for_the_range_is_widened_to_the_most_bins():
    answer = curves(parse_all({"node-0": node_file(20_000)}), MetricsQuery(step=1))
    assert answer["step"] == 20
    assert len(answer["loss"]) <= MAX_ASKED_BINS


def test_a_step_that_fits_is_honoured():
    answer = curves(parse_all({"node-0": node_file(600)}), MetricsQuery(step=1))
    assert answer["step"] == 1
    assert len(answer["loss"]) == 600
