"""capsim.eval.perm_both against NumPy/SciPy re-derivations on hand-made inputs, its
p-values counted as capsim.metrics.resampling counts them: (count + 1) / (resamples + 1)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from capsim.eval import perm_both as perm

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
    got = perm.perm_both(first, second, perm.row_statistic(human, name), units, 80, 80, seed=7)
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
    # one added to the count and to the resamples (mt-metrics-eval's count / resamples
    # would give np.mean(differences >= delta))
    at_least, at_most = (differences >= delta - 1e-12).sum(), (differences <= delta + 1e-12).sum()
    assert got.p == pytest.approx((at_least + 1) / 81, abs=1e-12)
    assert got.p_reverse == pytest.approx((at_most + 1) / 81, abs=1e-12)


def test_perm_both_approaches_the_exact_permutation_distribution():
    """With 6 units the 64 swap patterns give the exact p-value; 4,000 resamples land near it."""
    human = np.array([1, 2, 3, 4, 5, 6.0])
    first = np.array([1.0, 2.5, 2.0, 4.0, 5.5, 5.0])
    second = np.array([3.0, 1.0, 2.0, 6.0, 4.0, 5.0])
    a, b = stats.zscore(first), stats.zscore(second)
    pearson = perm.row_statistic(human, "pearson")
    delta = stats.pearsonr(a, human)[0] - stats.pearsonr(b, human)[0]
    exact = np.mean(
        [
            stats.pearsonr(np.where(s, b, a), human)[0]
            - stats.pearsonr(np.where(s, a, b), human)[0]
            >= delta - 1e-12
            for s in itertools.product([False, True], repeat=6)
        ]
    )
    got = perm.perm_both(first, second, pearson, resamples=4000, block_size=4000, seed=0)
    assert got.p == pytest.approx(exact, abs=0.03)


def test_perm_both_stops_early_at_a_block_boundary():
    """A metric against its own copy: every difference is 0, p = 1 > early_max after the
    first block; a clear winner: p = 1 / 101 (no resample as large) < early_min after the
    first block."""
    rng = np.random.default_rng(0)
    human = rng.normal(size=200)
    statistic = perm.row_statistic(human, "pearson")
    same = perm.perm_both(human, human.copy(), statistic, resamples=1000, block_size=100)
    assert (same.p, same.resamples) == (1.0, 100)
    noisy = human + rng.normal(0, 3, 200)
    clear = perm.perm_both(human, noisy, statistic, resamples=1000, block_size=100)
    assert clear.p == 1 / 101 and clear.p_reverse == 1.0 and clear.resamples == 100
    full = perm.perm_both(human, noisy, statistic, resamples=300, block_size=1000)
    assert full.resamples == 300  # no block boundary reached: every resample runs


def test_perm_both_swaps_whole_units():
    seen = []

    def statistic(metrics):
        seen.append(np.array(metrics))
        return metrics[:, 0]

    units = np.array([0, 0, 1, 1, 1])
    first, second = np.array([1.0, 2, 3, 4, 10]), np.array([5.0, 1, 7, 2, 0])
    perm.perm_both(first, second, statistic, units, resamples=50, block_size=50)
    a, b = perm.zscore(first), perm.zscore(second)
    for mixed in seen[1:]:
        from_first = np.isclose(mixed, a)
        assert (from_first[:, :2] == from_first[:, :1]).all()
        assert (from_first[:, 2:] == from_first[:, 2:3]).all()
        assert (from_first | np.isclose(mixed, b)).all()


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="unknown statistic"):
        perm.row_statistic(np.arange(3.0), "kendall")
    with pytest.raises(ValueError, match="resamples"):
        perm.perm_both(np.arange(3.0), np.arange(3.0), lambda m: m[:, 0], resamples=0)
