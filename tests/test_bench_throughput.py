"""The throughput benchmark (bench/throughput.py) on tiny sizes: it runs, and compares like with like.

torch is not a dependency of the library (only bench/ uses it): this file needs the
bench extra, skips without it, and CI runs it in its bench step (-m bench).
"""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import pytest
from conftest import skip_reason

# As bench/__init__.py does, before torch loads (see there why).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# (pytest.importorskip itself, so that the imports below may follow it)
pytest.importorskip("torch", reason=skip_reason("torch"))

from bench import harness, minilm
from bench.cases import catalogue
from bench.throughput_tables import i2ce_step as parts
from bench.throughput_tables import pipeline, scoring, training
from capsim import text
from configs import i2ce_coco_margin
from i2ce_jax import model as i2ce_model
from i2ce_jax.scorer import I2CEScorer

pytestmark = pytest.mark.bench

TINY = catalogue.Sizes(batch_size=8, vocab_size=64, image_dim=16, width=8)
GTS = {
    "a": ["a dog runs on the grass", "a brown dog is running", "a dog plays outside"],
    "b": ["two people sit on a bench", "people sitting in a park"],
}
RES = {"a": ["a dog is running"], "b": ["a man sits on a bench"]}


def _positive_finite(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _assert_ratio_matches_sides(row: dict, ours_is_speed: bool = True) -> None:
    """The row's per-round ratios bracket the ratio of its two sides' medians (a median
    is monotone, so this holds whenever the ratio is ours over the reference): a row
    with its sides swapped, or a ratio of something else, fails."""
    of_medians = row["ours"] / row["reference"] if ours_is_speed else row["reference"] / row["ours"]
    assert row["ratio_min"] * (1 - 1e-9) <= of_medians <= row["ratio_max"] * (1 + 1e-9), row


@pytest.fixture
def counting_load(monkeypatch):
    """os.getloadavg() rising by 1 per call, so a row's load shows when it was read."""
    calls = iter(range(1, 10**6))
    monkeypatch.setattr(harness.os, "getloadavg", lambda: (float(next(calls)), 0.0, 0.0))


@pytest.mark.parametrize("name", list(catalogue.TRAINING_MODELS))
def test_training_measurement_compares_the_same_model(name, counting_load):
    row = training.measure_training(name, steps=2, warmup=1, sizes=TINY, rounds=3)
    assert row["name"] == name and row["what"] == "train" and row["rounds"] == 3
    assert all(_positive_finite(row[k]) for k in ("ours", "reference", "ratio_median"))
    _assert_ratio_matches_sides(row)
    assert row["flops_per_step"] > 0 and _positive_finite(row["flops_per_s"])
    assert 1 <= row["load_start"] < row["load_end"]  # read before, then after the rounds
    assert row["jax_parameters"] == row["torch_parameters"]
    # Same weights, same batch, same permutation, dropout off: the same loss.
    assert row["torch_initial_loss"] == pytest.approx(row["jax_initial_loss"], rel=1e-4, abs=1e-5)


def untrained_scorer(gts, res, width: int) -> I2CEScorer:
    """An I2CE scorer of the default model at ``width``, with a vocabulary of these captions."""
    captions = [c for refs in gts.values() for c in refs] + [
        c for cands in res.values() for c in cands
    ]
    vocab = text.Vocab.build(text.tokenize(c) for c in captions)
    config = i2ce_coco_margin.get_config()
    config.model.embed_dim = config.model.hidden_dim = width
    model = i2ce_model.build_model(config, len(vocab))
    return I2CEScorer(model.encoder, vocab, pooling=config.scorer.pooling)


def test_scoring_measurement_gives_positive_ratios_per_round():
    scorer = untrained_scorer(GTS, RES, width=8)
    rows = scoring.measure_scoring(GTS, RES, rounds=2, scorer=scorer)
    names = [r["name"] for r in rows]
    expected = [
        *(["I2CE-score-vs-coco-ptb"] if shutil.which("java") else []),
        "I2CE-score-vs-coco-pretokenised",
        *(["I2CE-score-vs-MiniLM"] if minilm.available() else []),
        "capsim-ngram-vs-coco-pretokenised",
    ]
    assert names == expected
    for row in rows:
        assert row["what"] == "score" and row["rounds"] == 2
        _assert_ratio_matches_sides(row)
        assert all(_positive_finite(row[k]) for k in ("ours", "reference", "ratio_median"))


def test_golden_pairs_have_five_references(shared_data):
    gts, res = harness.load_golden_pairs(
        shared_data / "golden" / "pycocoevalcap_flickr8k_expert.json", limit=50
    )
    assert len(res) == 50 and gts.keys() == res.keys()
    assert all(len(refs) == 5 for refs in gts.values())
    assert all(len(cands) == 1 for cands in res.values())


def test_training_table_has_one_line_per_row():
    row = dict(
        name="x",
        ours=2.0,
        reference=1.0,
        ratio_median=2.0,
        ratio_min=1.5,
        ratio_max=2.5,
        flops_per_step=3e9,
        flops_per_s=6e9,
        peak_fraction=0.5,
        load_start=1.0,
        load_end=2.0,
    )
    line = training.training_table([row]).splitlines()[-1]
    assert line == "| x | 2 | 1 | 2.00 | 1.50 | 2.50 | 3.00 | 6.0 | 50% | 1.00 / 2.00 |"


def test_pipeline_measurement_times_both_designs_on_the_same_corpus():
    rows = pipeline.measure_pipeline(batch_size=8, batches=3, rounds=2, num_images=64)
    assert [r["name"] for r in rows] == [
        "VTFN-pipeline",
        "I2CE-pipeline",
        "VTFN-pipeline-ArrayRecord",
    ]
    for row in rows:
        assert row["what"] == "pipeline" and row["images"] == 64
        assert _positive_finite(row["ours"]) and _positive_finite(row["reference"])
        _assert_ratio_matches_sides(row)


def test_length_bucketed_rows_cut_batches_to_few_widths_and_count_flops_there():
    name = "VTFN-GRU-bucketed"
    config = catalogue.model_config(name, catalogue.Sizes())
    batches = catalogue.synthetic_batches(name, config, catalogue.Sizes())
    widths = sorted({b["mask"].shape[1] for b in batches})
    assert len(batches) == catalogue.BUCKETED_BATCHES
    assert set(widths) <= {8, 12, 16, 20} and len(widths) > 1
    for batch in batches:  # cut to its widest caption, rounded up to the multiple of 4
        assert batch["mask"][:, -4:].any() and batch["ids"].shape == batch["mask"].shape
    padded = catalogue.model_config("VTFN-GRU", catalogue.Sizes())
    full = catalogue.step_flops(
        "VTFN-GRU", padded, catalogue.Sizes(), [{"mask": np.ones((128, 24))}]
    )
    assert catalogue.step_flops(name, config, catalogue.Sizes(), batches) < full


def test_paper_scale_parts_time_each_part_on_both_sides():
    rows = parts.measure_i2ce_parts(steps=1, rounds=2, sizes=TINY)
    assert [r["name"].split(" ", 1)[1] for r in rows] == ["readout", "decoder GRU", "whole step"]
    for row in rows:
        assert row["what"] == "part"
        assert _positive_finite(row["jax_seconds"]) and _positive_finite(row["torch_seconds"])
        of_medians = row["torch_seconds"] / row["jax_seconds"]
        assert row["ratio_min"] * (1 - 1e-9) <= of_medians <= row["ratio_max"] * (1 + 1e-9)
    readout, decoder, whole = (r["flops_per_step"] for r in rows)
    assert 0 < readout + decoder < whole and rows[-1]["share_of_step"] == 1.0


def test_checkpoint_stall_times_background_and_awaited_saves():
    row = parts.measure_checkpoint_stall(rounds=2, sizes=TINY)
    assert row["what"] == "checkpoint" and row["bytes"] > 0
    assert _positive_finite(row["ours"]) and _positive_finite(row["reference"])
    _assert_ratio_matches_sides(row, ours_is_speed=False)  # seconds: awaited / background


def test_another_packaged_model_gets_its_own_scoring_section(tmp_path, monkeypatch):
    monkeypatch.setattr(harness, "RESULTS_MD", tmp_path / "RESULTS.md")
    monkeypatch.setattr(scoring, "RESULTS_JSON", tmp_path / "throughput.json")
    row = dict(
        name="I2CE-score-vs-MiniLM",
        description="d",
        candidates=3,
        rounds=2,
        what="score",
        ours=10.0,
        reference=1.0,
        ratio_median=10.0,
        ratio_min=9.0,
        ratio_max=11.0,
        load_start=1.0,
        load_end=1.5,
    )
    scoring.write_scoring_results("cmd base", [row], "base")
    scoring.write_scoring_results("cmd large", [{**row, "ratio_median": 5.0}], "large")
    markdown = (tmp_path / "RESULTS.md").read_text()
    assert "## Scoring throughput\n" in markdown and "## Scoring throughput: large\n" in markdown
    base_section = markdown.split("## Scoring throughput\n")[1].split("\n## ")[0]
    assert "| 10.00 |" in base_section and "packaged `base` model" in base_section
    saved = json.loads((tmp_path / "throughput.json").read_text())
    assert [r["ratio_median"] for r in saved["rows"]] == [10.0]
    assert saved["scoring_large"]["rows"][0]["ratio_median"] == 5.0


def test_input_wait_rows_time_the_loop_against_its_step_on_each_path(tmp_path, monkeypatch):
    """``--only input`` at toy sizes: VTFN on both input paths (the device path sends
    indices, not feature rows), I2CE on its one; loop / step per round brackets the ratio
    of the medians; the rows land in input_wait.json and their RESULTS.md section."""
    from bench.throughput_tables import input_wait as inputs

    rows = inputs.measure_input_rows(inputs.TOY, rounds=2, models=("VTFN-BOW", "I2CE-default"))
    assert [(r["name"], r["path"]) for r in rows] == [
        ("VTFN-BOW", "device tables"),
        ("VTFN-BOW", "host gather"),
        ("I2CE-default", "no tables"),
    ]
    for row in rows:
        assert row["what"] == "input" and row["batch"] == inputs.TOY.batch_size
        assert _positive_finite(row["loop_examples_per_second"])
        assert _positive_finite(row["step_examples_per_second"])
        assert 0 <= row["input_wait_share"] < 1
        loop_over_step = row["loop_examples_per_second"] / row["step_examples_per_second"]
        assert row["loop_over_step_min"] * (1 - 1e-9) <= loop_over_step
        assert loop_over_step <= row["loop_over_step_max"] * (1 + 1e-9)
    on, off = rows[0]["batch_bytes"], rows[1]["batch_bytes"]
    assert off - on == inputs.TOY.batch_size * (inputs.TOY.image_dim * 4 - 4)  # rows -> indices
    monkeypatch.setattr(harness, "RESULTS_MD", tmp_path / "RESULTS.md")
    monkeypatch.setattr(inputs, "RESULTS_JSON", tmp_path / "input_wait.json")
    inputs.write_input_results("cmd", rows, harness.machine_facts())
    saved = json.loads((tmp_path / "input_wait.json").read_text())
    assert [r["name"] for r in saved] == ["VTFN-BOW", "VTFN-BOW", "I2CE-default"]
    assert "## Input wait\n" in (tmp_path / "RESULTS.md").read_text()


def test_two_commits_are_compared_by_their_median_ratios():
    from tools import throughput_commits

    runs = [
        {"model": "VTFN-BOW", "commit": "old", "ratio_median": 1.0},
        {"model": "VTFN-BOW", "commit": "new", "ratio_median": 1.3},
        {"model": "VTFN-BOW", "commit": "new", "ratio_median": 1.1},
        {"model": "VTFN-BOW", "commit": "old", "ratio_median": 1.2},
        {"model": "I2CE-default", "commit": "old", "ratio_median": 2.0},
        {"model": "I2CE-default", "commit": "new", "ratio_median": 1.0},
    ]
    rows = throughput_commits.compare(runs, head="new", ref="old")
    assert [row["model"] for row in rows] == ["VTFN-BOW", "I2CE-default"]
    assert rows[0]["JAX/PyTorch at old"] == "1.00, 1.20"
    assert rows[0]["JAX/PyTorch at new"] == "1.30, 1.10"
    assert rows[0]["new / old"] == "1.09"  # 1.2 / 1.1
    assert rows[1]["new / old"] == "0.50"


def test_a_row_that_fails_in_its_checkout_says_which(tmp_path):
    from tools import throughput_commits

    with pytest.raises(RuntimeError, match=r"no-such-model in .* failed"):
        throughput_commits.measure(tmp_path, "no-such-model", steps=1, rounds=1)
