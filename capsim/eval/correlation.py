"""Correlations between metric scores and human judgments.

Caption metrics are judged by rank agreement with people: Kendall tau-c at
caption level (the Flickr8k-Expert convention), tau-b, Spearman and Pearson
beside it, and the metric-by-metric matrix (the system level and every
bootstrap over resampled rows are in ``capsim.eval.weighted_agreement``). Inputs
are checked first, so a NaN score or a misaligned list fails loudly instead of
turning into a NaN correlation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy import stats

MIN_ITEMS = 2
MIN_SYSTEMS = 3


def _checked_pair(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Both inputs as float arrays after checking shape, length and finiteness."""
    arrays = {"x": np.asarray(x, dtype=np.float64), "y": np.asarray(y, dtype=np.float64)}
    for name, values in arrays.items():
        if values.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {values.shape}")
    if arrays["x"].size != arrays["y"].size:
        raise ValueError(
            f"length mismatch: x has {arrays['x'].size} items, y has {arrays['y'].size}"
        )
    if arrays["x"].size < MIN_ITEMS:
        raise ValueError(f"need at least {MIN_ITEMS} items to correlate, got {arrays['x'].size}")
    for name, values in arrays.items():
        non_finite = np.flatnonzero(~np.isfinite(values))
        if non_finite.size:
            index = non_finite[0]
            raise ValueError(f"{name}[{index}] is not finite ({values[index]})")
    return arrays["x"], arrays["y"]


def kendall_tau(x: Sequence[float], y: Sequence[float], variant: str = "c") -> float:
    """Kendall tau-b or tau-c (scipy.stats.kendalltau). A constant input gives NaN."""
    if variant not in ("b", "c"):
        raise ValueError(f"Kendall tau variant must be 'b' or 'c', got {variant!r}")
    x, y = _checked_pair(x, y)
    return float(stats.kendalltau(x, y, variant=variant).statistic)


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation. A constant input gives NaN."""
    x, y = _checked_pair(x, y)
    return float(stats.spearmanr(x, y).statistic)


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation. A constant input gives NaN."""
    x, y = _checked_pair(x, y)
    return float(stats.pearsonr(x, y).statistic)


CORRELATIONS: dict[str, Callable[[Sequence[float], Sequence[float]], float]] = {
    "kendall_tau_b": functools.partial(kendall_tau, variant="b"),
    "kendall_tau_c": functools.partial(kendall_tau, variant="c"),
    "spearman": spearman,
    "pearson": pearson,
}


def correlations(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """Kendall tau-b, tau-c, Spearman and Pearson of x against y."""
    return {name: correlate(x, y) for name, correlate in CORRELATIONS.items()}


def correlation_matrix(
    metric_scores: Mapping[str, Sequence[float]], method: str = "kendall_tau_c"
) -> tuple[list[str], np.ndarray]:
    """The symmetric metric-by-metric correlation matrix, with its row/column names.

    The diagonal is computed like any other cell, so with tied scores Kendall
    tau-c of a metric with itself is below 1.
    """
    if method not in CORRELATIONS:
        raise ValueError(f"unknown correlation {method!r}: use one of {sorted(CORRELATIONS)}")
    correlate = CORRELATIONS[method]
    names = list(metric_scores)
    matrix = np.empty((len(names), len(names)))
    for row, first in enumerate(names):
        for column in range(row, len(names)):
            value = correlate(metric_scores[first], metric_scores[names[column]])
            matrix[row, column] = matrix[column, row] = value
    return names, matrix
