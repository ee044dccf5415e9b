"""bench/quality/meta_evaluation.py: on the real Expert files, the tables it prints."""

from __future__ import annotations

import sys

from bench.quality import meta_evaluation


def test_the_bench_prints_cost_intervals_and_claims(shared_data, monkeypatch, capsys):
    monkeypatch.setattr(
        sys, "argv", ["meta_evaluation.py", "--no-models", "--resamples", "20", "--rounds", "1"]
    )
    meta_evaluation.main()
    printed = capsys.readouterr().out
    assert "16992 ratings of 5664 pairs" in printed
    assert "| built-in metrics (7) | 20 |" in printed
    cider = next(line for line in printed.splitlines() if line.startswith("| CIDEr |"))
    assert cider.split("|")[2].strip() == "43.89"  # τc × 100, as in RESULTS
    assert "| CIDEr − METEOR | +2.07 |" in printed
