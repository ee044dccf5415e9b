"""capsim.eval.weighted_agreement: weighted statistics against brute force, the bootstrap's
tests on planted and null differences, Williams' test by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from capsim.data.judgments import Judgment, PairJudgment
from capsim.eval import absolute_sets, pairwise_sets
from capsim.eval import judgment_harness as harness
from capsim.eval import weighted_agreement as weighted
from capsim.eval.judgment_sets import judgment_set
from capsim.metrics import resampling


def _scipy_row_statistics(metric, human) -> list[float]:
    return [
        stats.kendalltau(metric, human, variant="c").statistic,
        stats.kendalltau(metric, human, variant="b").statistic,
        stats.spearmanr(metric, human).statistic,
        stats.pearsonr(metric, human).statistic,
    ]


@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_weighted_rows_equal_the_rows_repeated():
    """A row drawn k times is k tied copies: every statistic equals scipy on the repeats."""
    rng = np.random.default_rng(0)
    for _ in range(40):
        n = int(rng.integers(4, 50))
        metric = rng.integers(0, 6, n) + 0.5 * (rng.random(n) < 0.3)
        human = rng.integers(1, 5, n).astype(float)
        weights = rng.integers(0, 4, n).astype(float)
        if weights.sum() < 3:
            continue
        got = weighted.row_statistics(weighted.RankedRows.of(metric, human), weights)[0]
        counts = weights.astype(int)
        expected = _scipy_row_statistics(np.repeat(metric, counts), np.repeat(human, counts))
        np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_a_constant_metric_gives_nan_not_a_number():
    rows = weighted.RankedRows.of(np.ones(6), np.arange(6.0))
    assert np.isnan(weighted.row_statistics(rows, np.ones(6))[0]).all()


def _judgments(human, images, systems=None) -> list[Judgment]:
    return [
        Judgment(
            f"img{images[i]}",
            f"caption {i}",
            str(i),
            ("a reference",),
            float(human[i]),
            system=systems[i] if systems else None,
        )
        for i in range(len(human))
    ]


def test_intervals_equal_brute_force_resampling_of_images():
    """Every resample's τc recomputed with scipy on the materialised rows gives the same
    percentile interval, and the comparison's difference the same interval."""
    rng = np.random.default_rng(5)
    human = rng.integers(1, 5, 60).astype(float)
    images = np.repeat(np.arange(20), 3)
    pairs = harness.group_judgments(_judgments(human, images))
    scores = {"a": human + rng.normal(0, 1, 60), "b": human + rng.normal(0, 2, 60)}
    resamples, seed = 30, 11
    report, comparisons = absolute_sets.absolute_report("tau_c", pairs, scores, resamples, seed)
    rng = np.random.default_rng(seed)
    weights = resampling.group_counts(rng, pairs.image_of_pair[pairs.pair_of_rating], resamples)
    brute = {}
    for metric, per_pair in scores.items():
        values = []
        for w in weights.astype(int):
            rows = np.repeat(np.arange(60), w)
            values.append(
                stats.kendalltau(per_pair[rows], human[rows], variant="c").statistic * 100
            )
        brute[metric] = np.array(values)
        low, high = np.percentile(brute[metric], [2.5, 97.5])
        assert report[metric]["tau_c"]["ci_low"] == pytest.approx(low)
        assert report[metric]["tau_c"]["ci_high"] == pytest.approx(high)
        full = stats.kendalltau(per_pair, human, variant="c").statistic * 100
        assert report[metric]["tau_c"]["value"] == pytest.approx(full)
    low, high = np.percentile(brute["a"] - brute["b"], [2.5, 97.5])
    entry = comparisons["a"]["b"]
    assert (entry["ci_low"], entry["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert comparisons["b"]["a"]["delta"] == pytest.approx(-entry["delta"])


def test_a_metric_against_its_own_copy_is_level_with_p_one():
    rng = np.random.default_rng(0)
    human = rng.integers(1, 5, 90).astype(float)
    pairs = harness.group_judgments(_judgments(human, np.repeat(np.arange(30), 3)))
    metric = human + rng.normal(0, 1, 90)
    _, comparisons = absolute_sets.absolute_report(
        "tau_c", pairs, {"m": metric, "copy": metric.copy()}, 200, 0
    )
    entry = comparisons["copy"]["m"]
    assert entry["delta"] == 0 and entry["ci_low"] == 0 and entry["ci_high"] == 0
    assert entry["p_value"] == 1.0 and entry["p_value_williams"] == 1.0


def _null_p_value(seed: int) -> float:
    """Two metrics equally noisy versions of the human scores: no true difference."""
    rng = np.random.default_rng(seed)
    human = rng.normal(size=200)
    first = harness.group_judgments(_judgments(human, np.arange(200)))
    scores = {"a": human + rng.normal(size=200), "b": human + rng.normal(size=200)}
    _, comparisons = absolute_sets.absolute_report("pearson", first, scores, 199, seed)
    return comparisons["a"]["b"]["p_value"]


def test_p_values_under_a_seeded_null_are_roughly_uniform():
    p_values = np.array([_null_p_value(seed) for seed in range(120)])
    assert 0.0 < np.mean(p_values < 0.1) < 0.2  # about 0.1
    assert 0.35 < np.mean(p_values < 0.5) < 0.65  # about 0.5
    assert stats.kstest(p_values, "uniform").pvalue > 0.01


def test_a_planted_difference_is_found_by_both_tests():
    rng = np.random.default_rng(1)
    human = rng.normal(size=300)
    pairs = harness.group_judgments(_judgments(human, np.arange(300) // 2))
    scores = {"good": human + 0.5 * rng.normal(size=300), "poor": human + 2 * rng.normal(size=300)}
    _, comparisons = absolute_sets.absolute_report("pearson", pairs, scores, 500, 0)
    entry = comparisons["good"]["poor"]
    assert entry["delta"] > 0 and entry["ci_low"] > 0
    assert entry["p_value"] < 0.01 and entry["p_value_williams"] < 0.01


def test_williams_test_on_a_hand_computed_case():
    """r12 = 0.5, r13 = 0.3, r23 = 0.4, n = 50, by hand:
    |R| = 1 - 0.25 - 0.09 - 0.16 + 2(0.5)(0.3)(0.4) = 0.62;
    t = 0.2 sqrt(49 x 1.4) / sqrt(2 (49 / 47) 0.62 + 0.4^2 x 0.6^3)
      = 1.656502 / sqrt(1.292766 + 0.034560) = 1.656502 / 1.152097 = 1.437815;
    two-sided p with 47 degrees of freedom: 0.1571 (t table: between 0.10 and 0.20)."""
    t, p = weighted.williams_test(0.5, 0.3, 0.4, 50)
    assert t == pytest.approx(1.437815, abs=1e-5)
    assert p == pytest.approx(2 * stats.t.sf(1.437815, 47), abs=1e-6)
    assert 0.10 < p < 0.20
    assert weighted.williams_test(0.3, 0.5, 0.4, 50)[0] == pytest.approx(-t)
    with pytest.raises(ValueError, match="more than 3"):
        weighted.williams_test(0.5, 0.3, 0.4, 3)


def test_system_level_statistics_match_scipy_on_system_means():
    rng = np.random.default_rng(2)
    systems = np.repeat(np.arange(5), 8)
    human = rng.normal(size=40) + systems
    metric = rng.normal(size=40) + 0.5 * systems
    got = weighted.system_statistics(metric, human, systems, np.ones(40))[0]
    metric_means = [metric[systems == s].mean() for s in range(5)]
    human_means = [human[systems == s].mean() for s in range(5)]
    assert got[0] == pytest.approx(stats.kendalltau(metric_means, human_means).statistic)
    assert got[1] == pytest.approx(stats.pearsonr(metric_means, human_means).statistic)


def test_pascal_bootstrap_resamples_within_categories():
    judgments = [
        PairJudgment("i", f"a{k}", f"b{k}", ("r",), preference, category)
        for k, (preference, category) in enumerate(
            [(1.0, "HC")] * 10 + [(0.0, "HC")] * 10 + [(1.0, "MM")] * 20
        )
    ]
    pairs = pairwise_sets.preference_pairs(judgments)
    right = np.tile([1.0, 0.0], 40)  # always picks a: right on 30 of 40 pairs
    report, comparisons = pairwise_sets.pascal_report(
        pairs, {"a": right, "flat": np.ones(80)}, 300, 0
    )
    assert report["a"]["MM"] == {"value": 100.0, "ci_low": 100.0, "ci_high": 100.0}
    assert report["a"]["HC"]["value"] == 50.0 and report["a"]["HC"]["ci_low"] < 50
    assert report["flat"]["mean"]["ci_low"] == report["flat"]["mean"]["ci_high"] == 50.0
    assert comparisons["a"]["flat"]["delta"] == pytest.approx(25.0)
    assert "p_value_williams" not in comparisons["a"]["flat"]


def test_bad_settings_are_refused():
    pairs = harness.group_judgments(_judgments([1, 2, 3], [0, 1, 2]))
    scored = harness.ScoredSet(judgment_set("thumb"), pairs, {"m": np.array([1.0, 2.0, 4.0])}, {})
    with pytest.raises(ValueError, match="resamples"):
        harness.set_report(scored, resamples=-1)
    with pytest.raises(ValueError, match="confidence"):
        harness.set_report(scored, resamples=5, confidence=1.5)
