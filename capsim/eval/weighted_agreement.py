"""How a metric agrees with human judgments over weighted rows, and how two metrics compare.

A metric's agreement with human judgments is a statistic over rows (Kendall τ,
Spearman, Pearson; the accuracy on PASCAL-50S pairs). Rows of one image are not
independent, so the bootstrap resamples *images*, each image keeping all its rows
(PASCAL-50S: pairs, within each category; ``capsim.metrics.resampling`` draws them). A
resample is a count per row, and every statistic is computed on the counts directly: a
row drawn k times is k copies, tied with each other, exactly as if the rows were
repeated. Nothing is re-scored inside the loop; the metrics scored the rows once.

Kendall's τ over weighted rows takes O(n log n) per resample: a Fenwick tree over the
metric's ranks counts the concordant and discordant pairs while the rows are visited
in the order of the human scores (precomputed once). Both τ variants, Spearman and
Pearson come from the same pass, compiled by numba and spread over the resamples.

- interval: the percentile interval of the resampled statistic;
- paired difference: the two metrics on the *same* resamples, with the paired
  bootstrap's p-value of ``capsim.metrics.resampling`` (a metric against its own copy
  gets p = 1);
- Williams' test (Williams 1959; as in Graham & Baldwin 2014): the difference of two
  Pearson correlations with the same human scores, given their correlation with each
  other; two-sided, n - 3 degrees of freedom, rows taken as independent (they are not
  quite: an image's rows share it, which the bootstrap accounts for and Williams does not).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numba
import numpy as np
from scipy import stats

from capsim.metrics import resampling

# The absolute sets' statistics, in the order of the columns of ROW_STATISTICS' output.
ROW_STATISTICS = ("tau_c", "tau_b", "spearman", "pearson")
SYSTEM_STATISTICS = ("system_kendall_tau_b", "system_pearson")
DEFAULT_CONFIDENCE = 0.95
PERCENT = 100.0  # reports give every statistic × 100


@dataclasses.dataclass(frozen=True)
class RankedRows:
    """One metric against the human scores, ranked once for every resample.

    ``order``: the rows sorted by human score, then metric; ``human_starts``: where each
    run of equal human scores begins in ``order`` (and its end); ``metric_rank`` and
    ``human_rank``: each row's dense rank (0 = lowest).
    """

    metric: np.ndarray
    human: np.ndarray
    order: np.ndarray
    human_starts: np.ndarray
    metric_rank: np.ndarray
    human_rank: np.ndarray

    @classmethod
    def of(cls, metric: np.ndarray, human: np.ndarray) -> RankedRows:
        metric = np.asarray(metric, np.float64)
        human = np.asarray(human, np.float64)
        order = np.lexsort((metric, human))
        sorted_human = human[order]
        starts = np.flatnonzero(np.r_[True, sorted_human[1:] != sorted_human[:-1], True])
        return cls(
            metric,
            human,
            order,
            starts,
            np.unique(metric, return_inverse=True)[1].astype(np.int64),
            np.unique(human, return_inverse=True)[1].astype(np.int64),
        )


@numba.njit(cache=True, nogil=True)
def _group_ranks(rank: np.ndarray, weights: np.ndarray, groups: int) -> tuple:
    """(average rank of each value group among the weighted rows, groups with weight,
    pairs tied within groups)."""
    weight = np.zeros(groups)
    for i in range(rank.size):
        weight[rank[i]] += weights[i]
    average = np.empty(groups)
    below = 0.0
    present = 0
    tied = 0.0
    for g in range(groups):
        average[g] = below + (weight[g] + 1.0) / 2.0
        below += weight[g]
        if weight[g] > 0:
            present += 1
        tied += weight[g] * (weight[g] - 1.0) / 2.0
    return average, present, tied


@numba.njit(cache=True, nogil=True, inline="always")
def _prefix(tree: np.ndarray, rank: int) -> float:
    """The weight of the rows inserted into the Fenwick ``tree`` with a rank below ``rank``."""
    total = 0.0
    while rank > 0:
        total += tree[rank]
        rank -= rank & -rank
    return total


@numba.njit(cache=True, nogil=True)
def _weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> float:
    total = weights.sum()
    mean_x = (weights * x).sum() / total
    mean_y = (weights * y).sum() / total
    dx, dy = x - mean_x, y - mean_y
    sxx = (weights * dx * dx).sum()
    syy = (weights * dy * dy).sum()
    if sxx == 0.0 or syy == 0.0:
        return np.nan
    return (weights * dx * dy).sum() / np.sqrt(sxx * syy)


@numba.njit(cache=True, nogil=True)
def row_statistics_kernel(
    metric: np.ndarray,
    human: np.ndarray,
    order: np.ndarray,
    human_starts: np.ndarray,
    metric_rank: np.ndarray,
    human_rank: np.ndarray,
    weights: np.ndarray,
) -> np.ndarray:
    """τc, τb, Spearman and Pearson of the rows repeated ``weights`` times each."""
    metric_groups = metric_rank.max() + 1
    tree = np.zeros(metric_groups + 1)  # Fenwick tree of weights by metric rank
    concordant = 0.0
    discordant = 0.0
    inserted = 0.0
    for run in range(human_starts.size - 1):
        for k in range(human_starts[run], human_starts[run + 1]):
            row = order[k]
            w = weights[row]
            if w == 0:
                continue
            # Earlier rows have a lower human score: below the metric rank they agree,
            # above it they disagree, at it they tie (neither).
            below = _prefix(tree, metric_rank[row])
            at_or_below = _prefix(tree, metric_rank[row] + 1)
            concordant += w * below
            discordant += w * (inserted - at_or_below)
        for k in range(human_starts[run], human_starts[run + 1]):
            row = order[k]
            w = weights[row]
            if w == 0:
                continue
            i = metric_rank[row] + 1
            while i <= metric_groups:
                tree[i] += w
                i += i & -i
            inserted += w
    metric_average, metric_present, metric_tied = _group_ranks(metric_rank, weights, metric_groups)
    human_average, human_present, human_tied = _group_ranks(
        human_rank, weights, human_rank.max() + 1
    )
    total = inserted
    pairs = total * (total - 1.0) / 2.0
    out = np.full(4, np.nan)
    classes = min(metric_present, human_present)
    if classes > 1:
        out[0] = 2.0 * (concordant - discordant) / (total * total * (classes - 1.0) / classes)
    denominator = (pairs - metric_tied) * (pairs - human_tied)
    if denominator > 0:
        out[1] = (concordant - discordant) / np.sqrt(denominator)
    out[2] = _weighted_pearson(metric_average[metric_rank], human_average[human_rank], weights)
    out[3] = _weighted_pearson(metric, human, weights)
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def _resampled_row_statistics(
    metric, human, order, human_starts, metric_rank, human_rank, weights
) -> np.ndarray:
    out = np.empty((weights.shape[0], 4))
    for r in numba.prange(weights.shape[0]):
        out[r] = row_statistics_kernel(
            metric, human, order, human_starts, metric_rank, human_rank, weights[r]
        )
    return out


def row_statistics(rows: RankedRows, weights: np.ndarray) -> np.ndarray:
    """[resamples, 4]: ROW_STATISTICS of the metric against the humans under each row of
    ``weights`` (one weight per row; a 1-D ``weights`` gives one line)."""
    weights = np.atleast_2d(np.asarray(weights, np.float64))
    return _resampled_row_statistics(
        rows.metric,
        rows.human,
        rows.order,
        rows.human_starts,
        rows.metric_rank,
        rows.human_rank,
        weights,
    )


def system_statistics(
    metric: np.ndarray, human: np.ndarray, system_of_row: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """[resamples, 2]: Kendall τb and Pearson between the per-system means of the metric and
    of the human scores, each system's mean taken over the resampled rows."""
    weights = np.atleast_2d(np.asarray(weights, np.float64))
    systems = system_of_row.max() + 1
    one_hot = np.zeros((system_of_row.size, systems))
    one_hot[np.arange(system_of_row.size), system_of_row] = 1.0
    counts = weights @ one_hot
    with np.errstate(invalid="ignore", divide="ignore"):
        metric_means = (weights * metric) @ one_hot / counts
        human_means = (weights * human) @ one_hot / counts
    first, second = np.triu_indices(systems, 1)
    metric_sign = np.sign(metric_means[:, first] - metric_means[:, second])
    human_sign = np.sign(human_means[:, first] - human_means[:, second])
    with np.errstate(invalid="ignore", divide="ignore"):
        tau_b = (metric_sign * human_sign).sum(1) / np.sqrt(
            np.abs(metric_sign).sum(1) * np.abs(human_sign).sum(1)
        )
        dm = metric_means - metric_means.mean(1, keepdims=True)
        dh = human_means - human_means.mean(1, keepdims=True)
        pearson = (dm * dh).sum(1) / np.sqrt((dm * dm).sum(1) * (dh * dh).sum(1))
    return np.stack([tau_b, pearson], axis=1)


def pairwise_accuracy(
    agree: np.ndarray, category_of_pair: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """[resamples, categories + 1]: the weighted accuracy per category, then their mean."""
    weights = np.atleast_2d(np.asarray(weights, np.float64))
    categories = category_of_pair.max() + 1
    one_hot = np.zeros((category_of_pair.size, categories))
    one_hot[np.arange(category_of_pair.size), category_of_pair] = 1.0
    per_category = ((weights * agree) @ one_hot) / (weights @ one_hot)
    return np.concatenate([per_category, per_category.mean(1, keepdims=True)], axis=1)


def interval(values: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """The percentile interval of resampled values (resamples where the statistic is
    undefined, as for a constant metric, are left out)."""
    tail = (1 - confidence) / 2 * 100
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return np.nan, np.nan
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """(t, two-sided p) for H0: corr(1, 2) = corr(1, 3), variables 2 and 3 correlating r23,
    over n items (Williams 1959, the form of Steiger 1980, eq. 7)."""
    if n <= 3:
        raise ValueError(f"Williams' test needs more than 3 items, got {n}")
    determinant = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    mean = (r12 + r13) / 2
    denominator = 2 * (n - 1) / (n - 3) * determinant + mean**2 * (1 - r23) ** 3
    if denominator <= 0:  # the two metrics are one (r23 = 1): nothing to tell apart
        return 0.0, 1.0
    t = (r12 - r13) * np.sqrt((n - 1) * (1 + r23)) / np.sqrt(denominator)
    return float(t), float(2 * stats.t.sf(abs(t), n - 3))


def comparisons(
    full: Mapping[str, float],
    resampled: Mapping[str, np.ndarray],
    confidence: float = DEFAULT_CONFIDENCE,
    williams: Mapping[tuple[str, str], float] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """metric -> other -> {delta, ci_low, ci_high, p_value[, p_value_williams]} for every
    ordered pair of metrics, from one statistic on the full set and on each resample."""
    names: Sequence[str] = list(full)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for metric in names:
        out[metric] = {}
        for other in names:
            if other == metric:
                continue
            delta = full[metric] - full[other]
            differences = resampled[metric] - resampled[other]
            low, high = interval(differences, confidence)
            entry = {
                "delta": float(delta),
                "ci_low": low,
                "ci_high": high,
                "p_value": float(resampling.paired_bootstrap_p(differences, delta)),
            }
            if williams is not None:
                entry["p_value_williams"] = williams[metric, other]
            out[metric][other] = entry
    return out


def percent_summaries(
    full: np.ndarray, resampled: np.ndarray | None, columns: Sequence[str], confidence: float
) -> dict:
    """column -> value × 100, or {value, ci_low, ci_high} × 100 with resamples."""
    out = {}
    for k, column in enumerate(columns):
        if resampled is None:
            out[column] = PERCENT * float(full[k])
        else:
            low, high = interval(resampled[:, k], confidence)
            out[column] = {
                "value": PERCENT * float(full[k]),
                "ci_low": PERCENT * low,
                "ci_high": PERCENT * high,
            }
    return out


def percent_comparisons(comparisons: dict) -> dict:
    """``comparisons``' differences and intervals × 100, in place."""
    for others in comparisons.values():
        for entry in others.values():
            for key in ("delta", "ci_low", "ci_high"):
                entry[key] *= PERCENT
    return comparisons
