"""Correlation utilities against SciPy/NumPy, and the Flickr8k-Expert tau-c table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from capsim.eval.correlation import (
    correlation_matrix,
    correlations,
    kendall_tau,
    pearson,
    spearman,
)

GOLDEN_FILE = "golden/pycocoevalcap_flickr8k_expert.json"
EXPERT_FILE = "flickr8k/ExpertAnnotations.txt"
EXPERTS_PER_PAIR = 3
SELF_CAPTION_ROWS = 158
# Published Flickr8k-Expert Kendall tau-c x 100 (CLIPScore paper, shared/data/README.md).
PUBLISHED_TAU_C = {
    "BLEU-1": 32.32,
    "BLEU-4": 30.78,
    "ROUGE-L": 32.31,
    "METEOR": 41.82,
    "CIDEr": 43.89,
}

X = np.array([1.0, 2.0, 2.0, 3.0, 5.0, 4.0, 4.0])
Y = np.array([2.0, 1.0, 3.0, 3.0, 4.0, 6.0, 5.0])


def load_expert_protocol(shared_data: Path) -> tuple[list[dict], np.ndarray]:
    """Golden rows and their [rows, 3] expert ratings under the CLIPScore protocol.

    The protocol skips annotation rows whose candidate caption belongs to the
    query image; the remaining rows, in file order, are the golden rows.
    """
    rows = json.loads((shared_data / GOLDEN_FILE).read_text())["rows"]
    ratings, skipped = {}, 0
    for line in (shared_data / EXPERT_FILE).read_text().splitlines():
        image, candidate_id, *scores = line.split("\t")
        if candidate_id.split("#")[0] == image:
            skipped += 1
            continue
        ratings.setdefault((image, candidate_id), [int(score) for score in scores])
    assert skipped == SELF_CAPTION_ROWS
    assert list(ratings) == [(row["image"], row["candidate_id"]) for row in rows]
    return rows, np.array(list(ratings.values()))


def expert_tau_c(metric_values: np.ndarray, ratings: np.ndarray) -> float:
    """Kendall tau-c x 100 with each expert rating as its own row."""
    return 100 * kendall_tau(np.repeat(metric_values, EXPERTS_PER_PAIR), ratings.ravel(), "c")


@pytest.mark.parametrize("variant", ["b", "c"])
def test_kendall_tau_matches_scipy(variant):
    expected = stats.kendalltau(X, Y, variant=variant).statistic
    assert kendall_tau(X, Y, variant) == pytest.approx(expected, rel=1e-12)


def test_spearman_and_pearson_match_scipy_and_numpy():
    assert spearman(X, Y) == pytest.approx(stats.spearmanr(X, Y).statistic, rel=1e-12)
    assert pearson(X, Y) == pytest.approx(np.corrcoef(X, Y)[0, 1], rel=1e-12)


def test_correlations_reports_every_coefficient():
    values = correlations(X.tolist(), Y.tolist())
    assert values == {
        "kendall_tau_b": pytest.approx(stats.kendalltau(X, Y, variant="b").statistic),
        "kendall_tau_c": pytest.approx(stats.kendalltau(X, Y, variant="c").statistic),
        "spearman": pytest.approx(stats.spearmanr(X, Y).statistic),
        "pearson": pytest.approx(stats.pearsonr(X, Y).statistic),
    }


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        ([1.0, 2.0, 3.0], [1.0, 2.0], "length mismatch: x has 3 items, y has 2"),
        ([1.0], [2.0], "at least 2 items"),
        ([1.0, 2.0, np.nan], [1.0, 2.0, 3.0], r"x\[2\] is not finite"),
        ([1.0, 2.0, 3.0], [np.inf, 2.0, 3.0], r"y\[0\] is not finite"),
        ([[1.0, 2.0]], [[1.0, 2.0]], "one-dimensional"),
    ],
)
@pytest.mark.parametrize("correlate", [kendall_tau, spearman, pearson, correlations])
def test_bad_inputs_raise(correlate, x, y, message):
    with pytest.raises(ValueError, match=message):
        correlate(x, y)


def test_unknown_kendall_variant_raises():
    with pytest.raises(ValueError, match="'a'"):
        kendall_tau(X, Y, variant="a")


@pytest.mark.parametrize("method", ["kendall_tau_c", "spearman", "pearson"])
def test_correlation_matrix_is_symmetric_pairwise_correlation(method):
    scores = {"x": X, "y": Y, "z": X**2 - Y}
    names, matrix = correlation_matrix(scores, method)
    assert names == ["x", "y", "z"]
    np.testing.assert_array_equal(matrix, matrix.T)
    for i, first in enumerate(names):
        for j, second in enumerate(names):
            assert matrix[i, j] == pytest.approx(
                correlations(scores[first], scores[second])[method]
            )


def test_correlation_matrix_rejects_unknown_method():
    with pytest.raises(ValueError, match="unknown correlation 'cosine'"):
        correlation_matrix({"x": X, "y": Y}, "cosine")


def test_golden_metrics_reproduce_published_flickr8k_expert_tau_c(shared_data):
    rows, ratings = load_expert_protocol(shared_data)
    for metric, published in PUBLISHED_TAU_C.items():
        values = np.array([row[metric] for row in rows])
        assert round(expert_tau_c(values, ratings), 2) == published, metric
