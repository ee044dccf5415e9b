"""bench/speed/preemption_latency.py: its summary, and one real preempted 2-process run (slow)."""

from __future__ import annotations

import pytest

from bench.speed import preemption_latency


def _try(steps: int, agreed_s: float) -> dict:
    return dict(
        steps_after_signal=steps, step_ms=20.0, agreed_s=agreed_s, saved_s=agreed_s + 0.5,
        exited_s=agreed_s + 2.0,
    )  # fmt: skip


def test_summary_is_median_and_max_per_condition():
    tries = [_try(10, 0.2), _try(30, 0.9), _try(20, 0.4)]
    rows = preemption_latency.summary_rows(
        {"idle": {"tries": tries, "load_before": 1.0, "load_after": 1.5}}
    )
    assert rows == [
        {
            "condition": "idle",
            "tries": 3,
            "steps to agreement": "20.00 / 30.00",
            "step ms": "20.00 / 20.00",
            "s to agreement": "0.40 / 0.90",
            "s to saved checkpoint": "0.90 / 1.40",
            "s to both exited": "2.40 / 2.90",
            "load before / after": "1.00 / 1.50",
        }
    ]


@pytest.mark.slow
def test_one_preempted_demo_run_agrees_on_a_step_after_the_signal(tmp_path):
    measured = preemption_latency.one_try(tmp_path, 0, "runlocal", signal_at=10)
    assert measured["agreed_step"] > measured["signal_step"] >= 10
    assert 0 < measured["agreed_s"] <= measured["saved_s"] <= measured["exited_s"] < 60
