"""capsim.metrics.resampling: the draws every bootstrap and permutation test shares, and
the one p-value convention, (count + 1) / (resamples + 1), against NumPy by hand."""

from __future__ import annotations

import numpy as np
import pytest

from capsim.metrics import resampling


def test_group_counts_keep_each_groups_rows_together_and_strata_their_size():
    group = np.array([0, 0, 0, 1, 2, 2])
    weights = resampling.group_counts(np.random.default_rng(3), group, 50)
    assert weights.shape == (50, 6)
    # the three rows of image 0 are drawn together, as are the two of image 2
    assert (weights[:, 0] == weights[:, 1]).all() and (weights[:, 1] == weights[:, 2]).all()
    assert (weights[:, 4] == weights[:, 5]).all()
    assert (weights[:, [0, 3, 4]].sum(1) == 3).all()  # as many images as there are
    strata = np.array([0, 0, 1, 1, 1])
    drawn = resampling.group_counts(np.random.default_rng(1), np.arange(5), 200, strata)
    assert (drawn[:, :2].sum(1) == 2).all() and (drawn[:, 2:].sum(1) == 3).all()
    again = resampling.group_counts(np.random.default_rng(1), np.arange(5), 200, strata)
    np.testing.assert_array_equal(drawn, again)


def test_group_counts_are_the_bincount_of_integer_draws():
    """One group a row: a resample is NumPy's draw of row indices, counted."""
    draws = np.random.default_rng(4).integers(0, 7, size=(30, 7))
    expected = np.stack([np.bincount(d, minlength=7) for d in draws])
    got = resampling.group_counts(np.random.default_rng(4), np.arange(7), 30)
    np.testing.assert_array_equal(got, expected)


def test_swap_masks_are_fair_coins():
    masks = resampling.swap_masks(np.random.default_rng(0), 400, 50)
    assert masks.dtype == bool and masks.shape == (400, 50)
    assert 0.47 < masks.mean() < 0.53


def test_p_values_add_one_to_the_count_and_to_the_resamples():
    differences = np.array([[0.5, -0.1], [-0.3, 0.2], [0.1, np.nan], [0.3, 0.0]])
    delta = np.array([0.3, 0.2])
    got = resampling.two_sided_p(differences, delta)
    # column 0: |0.5|, |-0.3|, |0.3| reach 0.3 (3 of 4); column 1: |0.2| (1 of the 3 finite)
    np.testing.assert_allclose(got, [(3 + 1) / (4 + 1), (1 + 1) / (3 + 1)])
    assert resampling.p_value(0, 999) == pytest.approx(1 / 1000)  # never 0
    assert resampling.p_value(10, 10) == 1.0


def test_paired_bootstrap_p_centres_the_differences_first():
    differences = np.array([1.0, 1.2, 0.8, 1.1, 0.9])
    centred = np.abs(differences - differences.mean())
    expected = ((centred >= 1.0 - 1e-12).sum() + 1) / 6
    assert resampling.paired_bootstrap_p(differences, 1.0) == pytest.approx(expected)
    assert resampling.paired_bootstrap_p(np.zeros(9), 0.0) == 1.0  # a copy: p = 1


def test_reaching_allows_rounding_only():
    assert resampling.reaching(np.array([0.3 - 1e-14]), 0.3).all()  # the same sum, rounded
    assert not resampling.reaching(np.array([0.3 - 1e-9]), 0.3).any()
