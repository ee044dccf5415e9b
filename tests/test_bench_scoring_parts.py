"""bench/throughput_tables/scorer_parts.py and metric_suite.py on tiny inputs: the scorer's
parts add up to its call, the suite times both evaluators on the same files, a fresh process's first call."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from bench.throughput_tables import metric_suite, scorer_parts
from capsim import text
from configs import i2ce_coco_margin
from i2ce_jax.model import build_model
from i2ce_jax.scorer import I2CEScorer

GTS = {
    "a": ["a dog runs on the grass", "a brown dog is running", "a dog plays outside"],
    "b": ["two people sit on a bench", "people sitting in a park"],
}
RES = {"a": ["a dog is running"], "b": ["a man sits on a bench"]}


@pytest.fixture(scope="module")
def scorer() -> I2CEScorer:
    config = i2ce_coco_margin.get_config()
    config.model.embed_dim, config.model.hidden_dim = 8, 8
    vocab = text.Vocab.build(text.tokenize(c) for refs in GTS.values() for c in refs)
    return I2CEScorer(build_model(config, len(vocab)).encoder, vocab)


def test_the_scorers_parts_are_timed_in_every_round_and_fill_the_table(scorer):
    row = scorer_parts.measure_scorer_parts(scorer, GTS, RES, rounds=2, peak=1e11)
    assert row["sentences"] == 7 and row["candidates"] == 2  # 5 references, 2 candidates
    sentences = [*(c for refs in GTS.values() for c in refs), *(c[0] for c in RES.values())]
    assert row["real_tokens"] == sum(len(text.tokenize(s)) + 2 for s in sentences)  # <S>, </S>
    assert row["padded_tokens"] >= row["real_tokens"]
    assert set(row["parts"]) == {*scorer_parts.I2CE_PARTS, "rest"}
    assert all(len(seconds) == 2 for seconds in row["parts"].values())
    assert all(t > 0 for p in scorer_parts.I2CE_PARTS for t in row["parts"][p])
    # The rest is what the whole call spends outside the parts run one by one.
    parts = np.sum([row["parts"][p] for p in scorer_parts.I2CE_PARTS], axis=0)
    np.testing.assert_allclose(parts + row["parts"]["rest"], row["whole"])
    assert math.isfinite(row["encoder_gflops_padded"]) and row["encoder_gflops_padded"] > 0
    assert row["encoder_gflops_real"] <= row["encoder_gflops_padded"]
    table = scorer_parts.scorer_parts_table(row)
    assert all(f"| {part} |" in table for part in scorer_parts.I2CE_PARTS)


def test_coco_files_hold_one_image_per_candidate(tmp_path):
    annotations, results = metric_suite.write_coco_files(GTS, RES, tmp_path)
    payload = json.loads(annotations.read_text())
    assert [i["id"] for i in payload["images"]] == [0, 1]
    assert [a["caption"] for a in payload["annotations"]] == [*GTS["a"], *GTS["b"]]
    assert json.loads(results.read_text()) == [
        {"image_id": 0, "caption": RES["a"][0]},
        {"image_id": 1, "caption": RES["b"][0]},
    ]


@pytest.mark.skipif(
    not metric_suite.suite_available(), reason="needs Java on PATH (pycocoevalcap's jars)"
)
@pytest.mark.slow  # both METEORs load their paraphrase tables, the jar in two JVMs (55 s)
def test_the_suite_times_both_evaluators_and_each_metric():
    row = metric_suite.measure_suite(GTS, RES, rounds=1)
    assert len(row["capsim"]) == len(row["pycocoevalcap"]) == 1
    assert set(row["metrics"]["capsim"]) == set(metric_suite.SUITE_METRICS)
    assert set(row["metrics"]["pycocoevalcap"]) == set(metric_suite.SUITE_METRICS) - {"I2CE"}
    assert row["ratio_median"] > 0
    table = metric_suite.suite_table(row)
    assert "| whole `evaluate()`, I2CE included |" in table
    assert "| whole `evaluate()`, the same metrics (the drop-in without I2CE) |" in table
    assert len(row["drop_in"]) == 1 and row["drop_in_ratio"]["ratio_median"] > 0
    assert set(row["meteor_phases"]) == {*metric_suite.METEOR_PHASES, "whole"}
    table = metric_suite.meteor_phase_table(row)
    assert all(f"| {phase} |" in table for phase in (*metric_suite.METEOR_PHASES, "rest"))
    assert "in one process" in metric_suite.goal_budget(row)


def test_meteor_phase_clocks_time_the_real_call_and_leave_it_unchanged():
    from capsim.metrics.meteor import Meteor, MeteorResourceError, statistics

    try:
        meteor = Meteor()
    except MeteorResourceError as error:  # no pycocoevalcap: no METEOR data
        pytest.skip(str(error))
    core = statistics.caption_statistics
    clocks: dict[str, float] = {}
    with metric_suite._meteor_phase_clocks(clocks):
        timed = meteor.compute_score(GTS, RES)
    assert timed == meteor.compute_score(GTS, RES)
    assert statistics.caption_statistics is core  # the wrappers are gone
    # Every phase ran.
    assert set(clocks) == set(metric_suite.METEOR_PHASES)
    assert all(seconds > 0 for seconds in clocks.values())


def test_the_first_call_is_timed_in_fresh_processes(tmp_path):
    rows = [{"key": k, "references": GTS[k], "candidate": RES[k][0]} for k in RES]
    golden = tmp_path / "golden.json"
    golden.write_text(json.dumps({"rows": rows}))
    times = scorer_parts.measure_first_call(golden, rounds=1)
    assert list(times) == ["empty cache", "cache of the previous run"]
    for runs in times.values():
        assert len(runs) == 1 and runs[0]["first_call"] > 0 and runs[0]["import_and_load"] > 0
    assert "| empty cache |" in scorer_parts.first_call_table(times)
