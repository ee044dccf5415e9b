"""capsim.eval.significance against NumPy/SciPy re-derivations on hand-made inputs:
PERM-BOTH, tie-calibrated pairwise accuracy, item-grouped correlation, clusters."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from capsim.eval import significance as sig

SCIPY = {
    "tau_c": lambda m, h: stats.kendalltau(m, h, variant="c").statistic,
    "tau_b": lambda m, h: stats.kendalltau(m, h, variant="b").statistic,
    "spearman": lambda m, h: stats.spearmanr(m, h).statistic,
}


@pytest.mark.parametrize("name", list(SCIPY))
@pytest.mark.parametrize("human_values", [4, 60])
def test_perm_both_equals_a_loop_over_the_same_swaps(name, human_values):
    """One block, no early stop: the p-value of a loop that swaps each unit's rows between
    the z-scored metrics and recomputes scipy's statistic, on the same random draws; with
    few human values (the class sweep) and many (the Fenwick tree)."""
    rng = np.random.default_rng(1)
    human = rng.integers(1, human_values + 1, 60).astype(float)
    units = np.repeat(np.arange(20), 3)  # three rows an image, swapped together
    first = human + rng.normal(0, 1.0, 60)
    second = human + rng.normal(0, 1.6, 60)
    first[::7] = first[1::7][: first[::7].size]  # ties in the metrics
    got = sig.perm_both(first, second, sig.row_statistic(human, name), units, 80, 80, seed=7)
    statistic = SCIPY[name]
    a, b = stats.zscore(first), stats.zscore(second)
    delta = statistic(a, human) - statistic(b, human)
    swaps = np.random.default_rng(7).integers(0, 2, (80, 20), dtype=bool)
    differences = []
    for swap in swaps:
        rows = swap[units]
        differences.append(
            statistic(np.where(rows, b, a), human) - statistic(np.where(rows, a, b), human)
        )
    differences = np.array(differences)
    assert got.resamples == 80
    assert got.delta == pytest.approx(delta, abs=1e-12)
    assert got.p == pytest.approx(np.mean(differences >= delta - 1e-12), abs=1e-12)
    assert got.p_reverse == pytest.approx(np.mean(differences <= delta + 1e-12), abs=1e-12)


def test_perm_both_approaches_the_exact_permutation_distribution():
    """With 6 units the 64 swap patterns give the exact p-value; 4,000 resamples land near it."""
    human = np.array([1, 2, 3, 4, 5, 6.0])
    first = np.array([1.0, 2.5, 2.0, 4.0, 5.5, 5.0])
    second = np.array([3.0, 1.0, 2.0, 6.0, 4.0, 5.0])
    a, b = stats.zscore(first), stats.zscore(second)
    pearson = sig.row_statistic(human, "pearson")
    delta = stats.pearsonr(a, human)[0] - stats.pearsonr(b, human)[0]
    exact = np.mean(
        [
            stats.pearsonr(np.where(s, b, a), human)[0]
            - stats.pearsonr(np.where(s, a, b), human)[0]
            >= delta - 1e-12
            for s in itertools.product([False, True], repeat=6)
        ]
    )
    got = sig.perm_both(first, second, pearson, resamples=4000, block_size=4000, seed=0)
    assert got.p == pytest.approx(exact, abs=0.03)


def test_perm_both_stops_early_at_a_block_boundary():
    """A metric against its own copy: every difference is 0, p = 1 > early_max after the
    first block; a clear winner: p < early_min after the first block."""
    rng = np.random.default_rng(0)
    human = rng.normal(size=200)
    statistic = sig.row_statistic(human, "pearson")
    same = sig.perm_both(human, human.copy(), statistic, resamples=1000, block_size=100)
    assert (same.p, same.resamples) == (1.0, 100)
    noisy = human + rng.normal(0, 3, 200)
    clear = sig.perm_both(human, noisy, statistic, resamples=1000, block_size=100)
    assert clear.p == 0.0 and clear.p_reverse == 1.0 and clear.resamples == 100
    full = sig.perm_both(human, noisy, statistic, resamples=300, block_size=1000)
    assert full.resamples == 300  # no block boundary reached: every resample runs


def test_perm_both_swaps_whole_units():
    seen = []

    def statistic(metrics):
        seen.append(np.array(metrics))
        return metrics[:, 0]

    units = np.array([0, 0, 1, 1, 1])
    first, second = np.array([1.0, 2, 3, 4, 10]), np.array([5.0, 1, 7, 2, 0])
    sig.perm_both(first, second, statistic, units, resamples=50, block_size=50)
    a, b = sig.zscore(first), sig.zscore(second)
    for mixed in seen[1:]:
        from_first = np.isclose(mixed, a)
        assert (from_first[:, :2] == from_first[:, :1]).all()
        assert (from_first[:, 2:] == from_first[:, 2:3]).all()
        assert (from_first | np.isclose(mixed, b)).all()


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
        got = sig.tie_calibrated_accuracy(metric, human, groups if grouped else None)
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
    result = sig.tie_calibrated_accuracy(metric, human)
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
    got = sig.grouped_correlation(metric, human, groups, "tau_c")
    assert got == pytest.approx(expected, abs=1e-12)
    pearson = np.mean(
        [stats.pearsonr(metric[groups == g], human[groups == g])[0] for g in range(8) if g != 3]
    )
    assert sig.grouped_correlation(metric, human, groups, "pearson") == pytest.approx(pearson)


def _assign_ranks(matrix: np.ndarray, alpha: float) -> list[int]:
    """mt-metrics-eval's AssignRanks, re-derived: matrix[i, j] is the p-value that metric i
    (sorted best first) beats metric j."""
    ranks, rank, start = [], 1, 0
    for i in range(matrix.shape[0]):
        if (matrix[start:i, i] <= alpha).any():
            rank, start = rank + 1, i
        ranks.append(rank)
    return ranks


def test_significance_clusters_follow_assign_ranks():
    rng = np.random.default_rng(2)
    for _ in range(30):
        n = int(rng.integers(2, 8))
        names = [f"m{k}" for k in range(n)]
        values = dict(zip(names, rng.permutation(n).astype(float), strict=True))
        p = {(a, b): float(rng.random() * 0.2) for a in names for b in names if a != b}
        order = sorted(names, key=lambda m: -values[m])
        matrix = np.ones((n, n))
        for i, a in enumerate(order):
            for j, b in enumerate(order):
                if a != b:
                    matrix[i, j] = p[a, b]
        expected = dict(zip(order, _assign_ranks(matrix, 0.05), strict=True))
        assert sig.significance_clusters(values, p) == expected


def test_clusters_by_hand():
    """A beats C but not B; B beats nobody significantly: A, B share rank 1, C starts rank
    2 and D, level with C, stays there."""
    values = {"A": 0.5, "B": 0.45, "C": 0.3, "D": 0.29}
    p = {(a, b): 0.5 for a in values for b in values if a != b}
    p["A", "C"] = 0.01
    p["A", "D"] = 0.01
    assert sig.significance_clusters(values, p) == {"A": 1, "B": 1, "C": 2, "D": 2}


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown statistic"):
        sig.row_statistic(np.arange(3.0), "kendall")
    with pytest.raises(ValueError, match="resamples"):
        sig.perm_both(np.arange(3.0), np.arange(3.0), lambda m: m[:, 0], resamples=0)
    with pytest.raises(ValueError, match="no group holds two items"):
        sig.tie_calibrated_accuracy(np.arange(3.0), np.arange(3.0), np.arange(3))
