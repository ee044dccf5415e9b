"""capsim.eval.item_agreement against NumPy/SciPy re-derivations on hand-made inputs:
tie-calibrated pairwise accuracy (acc23) and item-grouped correlation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from capsim.eval import item_agreement


def _brute_acc23(metric, human, groups, epsilon) -> float:
    """mt-metrics-eval's acc23 with metric ties at |Δ| <= ε, averaged over groups."""
    per_group = []
    for g in np.unique(groups):
        items = np.flatnonzero(groups == g)
        right = total = 0
        for i, j in itertools.combinations(items, 2):
            metric_tie = abs(metric[i] - metric[j]) <= epsilon
            human_tie = human[i] == human[j]
            if metric_tie or human_tie:
                right += metric_tie and human_tie
            else:
                right += (metric[i] - metric[j]) * (human[i] - human[j]) > 0
            total += 1
        if total:
            per_group.append(right / total)
    return float(np.mean(per_group))


@pytest.mark.parametrize("grouped", [False, True])
def test_tie_calibrated_accuracy_equals_a_search_over_every_epsilon(grouped):
    rng = np.random.default_rng(3)
    for _ in range(15):
        n = int(rng.integers(6, 30))
        human = rng.integers(1, 4, n).astype(float)
        metric = np.round(human + rng.normal(0, 0.8, n), 1)
        groups = rng.integers(0, 4, n) if grouped else np.zeros(n, np.int64)
        got = item_agreement.tie_calibrated_accuracy(metric, human, groups if grouped else None)
        candidates = np.unique(np.r_[0.0, np.abs(metric[:, None] - metric[None, :]).ravel()])
        accuracy = [_brute_acc23(metric, human, groups, e) for e in candidates]
        best = int(np.argmax(np.round(accuracy, 12)))
        assert got.accuracy == pytest.approx(accuracy[0], abs=1e-12)
        assert got.accuracy_eq == pytest.approx(accuracy[best], abs=1e-12)
        assert got.epsilon == pytest.approx(candidates[best], abs=1e-12)


def test_tie_calibration_pays_where_humans_tie():
    """Humans tie half the pairs; a metric with small noise on tied items gains by calling
    its small differences ties."""
    human = np.array([1, 1, 2, 2, 3, 3.0])
    metric = np.array([1.0, 1.01, 2.0, 2.02, 3.0, 2.99])
    result = item_agreement.tie_calibrated_accuracy(metric, human)
    assert result.accuracy == pytest.approx(12 / 15)
    assert result.accuracy_eq == pytest.approx(1.0)
    assert result.epsilon == pytest.approx(0.02)


def test_grouped_correlation_is_the_mean_of_scipy_per_group():
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(8), 7)
    human = rng.integers(1, 5, groups.size).astype(float)
    metric = human + rng.normal(0, 1, groups.size)
    metric[groups == 3] = 1.0  # constant: undefined, left out
    expected = np.nanmean(
        [
            stats.kendalltau(metric[groups == g], human[groups == g], variant="c").statistic
            if g != 3
            else np.nan
            for g in range(8)
        ]
    )
    got = item_agreement.grouped_correlation(metric, human, groups, "tau_c")
    assert got == pytest.approx(expected, abs=1e-12)
    pearson = np.mean(
        [stats.pearsonr(metric[groups == g], human[groups == g])[0] for g in range(8) if g != 3]
    )
    assert item_agreement.grouped_correlation(metric, human, groups, "pearson") == pytest.approx(
        pearson
    )


def test_no_group_with_a_pair_is_refused():
    with pytest.raises(ValueError, match="no group holds two items"):
        item_agreement.tie_calibrated_accuracy(np.arange(3.0), np.arange(3.0), np.arange(3))
