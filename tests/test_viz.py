"""capsim.viz and python -m capsim.report draw real PNGs from real inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import requires_matplotlib

pytestmark = requires_matplotlib

PNG_MAGIC = b"\x89PNG"


def _is_png(path) -> bool:
    return path.exists() and path.read_bytes()[:4] == PNG_MAGIC


def test_each_plot_writes_a_png(tmp_path):
    from capsim import viz

    rng = np.random.default_rng(0)
    human = rng.integers(1, 5, 200).astype(float)
    scores = {"I2CE": human + rng.normal(0, 1, 200), "CIDEr": rng.random(200)}
    viz.metric_vs_human(human, scores, tmp_path / "a.png", statistic={"I2CE": 40.0, "CIDEr": 10.0})
    viz.correlation_heatmap(np.array([[100, 40], [40, 100]]), ["x", "y"], tmp_path / "b.png")
    viz.pooling_curve({"max-1": 30.0, "max-2": 31.5, "max-3": 32.0}, tmp_path / "c.png")
    vectors = {"grounded": rng.normal(size=(60, 8)), "text-only": rng.normal(size=(60, 8))}
    viz.embedding_map(vectors, ["red", "blue", "green"] * 20, tmp_path / "d.png")
    assert all(_is_png(tmp_path / f"{name}.png") for name in "abcd")


def test_report_draws_curves_and_embeds_them(tmp_path):
    from capsim import report

    records = [
        {"step": s, "train/loss": 10.0 / s, "train/examples_per_second": 100.0} for s in (1, 2, 3)
    ] + [{"step": 3, "dev/same_image_auc": 71.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "results.json").write_text(json.dumps({"same_diff": {"auc": 71.0}}))
    written = report.write_report(tmp_path)
    text = written.read_text()
    assert "![training curves](report/training_curves.png)" in text
    assert "| same_diff | auc | 71.00 |" in text
    assert _is_png(tmp_path / "report" / "training_curves.png")


def test_report_of_a_folder_without_metrics_is_a_clear_error(tmp_path):
    from capsim import report

    with pytest.raises(FileNotFoundError, match=r"no metrics\.jsonl"):
        report.write_report(tmp_path)
