"""The MT field's meta-evaluation statistics (mt-metrics-eval), beside the image bootstrap.

- PERM-BOTH (Deutsch, Dror and Roth 2021; mt-metrics-eval's ``PermutationSigDiff``):
  each metric's scores are z-scored, then per resample each unit's scores are swapped
  between the two metrics with probability ½ and the statistic recomputed for both
  mixtures. The one-sided p-value that ``first`` beats ``second`` is the share of
  resamples whose difference is at least the observed one (no +1, as the reference
  computes it), checked every ``block_size`` resamples: below ``early_min`` or above
  ``early_max`` it stops early. Swaps are drawn per *unit*: a row, or an image where
  a set has several rows per image (its rows are not independent, as the bootstrap
  over images says too), so an image's rows always move together.
- Pairwise accuracy with tie calibration, ``acc_eq`` (Deutsch et al. 2023, "Ties
  Matter"; mt-metrics-eval's ``acc23``): over pairs of candidates, a pair counts when
  the metric orders it as the humans do, or when both tie; a metric difference of at
  most ε counts as a metric tie, and ε is searched to maximise the accuracy. Without
  calibration ε = 0. Item-grouped: the accuracy of each image's pairs, averaged.
- Item-grouped correlation: the statistic within each image, averaged over the images
  where it is defined (mt-metrics-eval drops NaNs too), against the pooled one.
- Significance clusters (mt-metrics-eval's ``AssignRanks``): metrics sorted by their
  statistic; a metric starts a new cluster only when some metric of the current
  cluster beats it significantly. Any test's one-sided p-values can feed it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence

import numba
import numpy as np

from capsim.eval import meta_statistics as meta

# mt-metrics-eval's PermutationSigDiffParams defaults.
PERM_BOTH_RESAMPLES = 1000
PERM_BOTH_BLOCK = 1000
EARLY_MIN = 0.02
EARLY_MAX = 0.5
SIGNIFICANCE = 0.05
# Resamples mixed at once: a [chunk, rows] pair of matrices stays well under a GiB.
_CHUNK = 100

Statistic = Callable[[np.ndarray], np.ndarray]  # [resamples, rows] scores -> [resamples]


@dataclasses.dataclass(frozen=True)
class PermBoth:
    """p: one-sided p-value that ``first`` beats ``second``; ``p_reverse``: that ``second``
    beats ``first``, from the same resamples; ``delta``: statistic(first) - statistic(second)."""

    p: float
    p_reverse: float
    delta: float
    resamples: int


def zscore(values: np.ndarray) -> np.ndarray:
    """(x - mean) / std (population std, as scipy.stats.zscore); a constant stays 0."""
    values = np.asarray(values, np.float64)
    spread = values.std()
    centred = values - values.mean()
    return centred / spread if spread > 0 else centred


def perm_both(
    first: np.ndarray,
    second: np.ndarray,
    statistic: Statistic,
    unit_of_row: np.ndarray | None = None,
    resamples: int = PERM_BOTH_RESAMPLES,
    block_size: int = PERM_BOTH_BLOCK,
    early_min: float = EARLY_MIN,
    early_max: float = EARLY_MAX,
    seed: int = 0,
) -> PermBoth:
    """PERM-BOTH between two metrics' per-row scores under one ``statistic`` (seeded).

    ``unit_of_row`` numbers the unit each row is swapped with (default: each row alone).
    The early stop looks at ``p`` only, so pass the metric with the higher statistic first
    to follow the reference, which orders metrics so."""
    if resamples < 1 or block_size < 1:
        raise ValueError(f"resamples and block_size must be >= 1, got {resamples}, {block_size}")
    first, second = zscore(first), zscore(second)
    if first.shape != second.shape:
        raise ValueError(f"the metrics score {first.size} and {second.size} rows")
    units = np.arange(first.size) if unit_of_row is None else np.asarray(unit_of_row, np.int64)
    delta = float(np.diff(statistic(np.stack([second, first])))[0])
    if np.isnan(delta):  # a metric's statistic is undefined (constant): nothing to test
        return PermBoth(float("nan"), float("nan"), delta, 0)
    rng = np.random.default_rng(seed)
    at_least = at_most = done = 0
    while done < resamples:
        block = min(block_size - done % block_size, resamples - done)
        for start in range(0, block, _CHUNK):
            swap = rng.integers(0, 2, (min(_CHUNK, block - start), units.max() + 1), dtype=bool)
            swapped = swap[:, units]
            mixed_first = np.where(swapped, second, first)
            mixed_second = np.where(swapped, first, second)
            differences = statistic(mixed_first) - statistic(mixed_second)
            differences = np.nan_to_num(differences)  # undefined on both sides: no difference
            at_least += int((differences >= delta).sum())
            at_most += int((differences <= delta).sum())
        done += block
        if done % block_size == 0 and not early_min <= at_least / done <= early_max:
            break
    return PermBoth(at_least / done, at_most / done, delta, done)


# --------------------------------------------------------------------------- statistics


@numba.njit(cache=True, nogil=True)
def _dense_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size, np.int64)
    rank = 0
    for k in range(values.size):
        if k and values[order[k]] != values[order[k - 1]]:
            rank += 1
        ranks[order[k]] = rank
    return ranks


@numba.njit(cache=True, nogil=True, parallel=True)
def _batched_row_statistic(
    metrics, human, order, human_starts, human_rank, weights, column
) -> np.ndarray:
    out = np.empty(metrics.shape[0])
    for b in numba.prange(metrics.shape[0]):
        ranks = _dense_ranks(metrics[b])
        out[b] = meta.row_statistics_kernel(
            metrics[b], human, order, human_starts, ranks, human_rank, weights
        )[column]
    return out


def row_statistic(human: np.ndarray, name: str, weights: np.ndarray | None = None) -> Statistic:
    """One of ``meta.ROW_STATISTICS`` (τc, τb, Spearman, Pearson) against ``human``, of
    each line of a [resamples, rows] matrix; ``weights`` counts each row's repeats."""
    if name not in meta.ROW_STATISTICS:
        raise ValueError(f"unknown statistic {name!r}; known: {', '.join(meta.ROW_STATISTICS)}")
    ranked = meta.RankedRows.of(np.zeros(len(human)), human)
    weights = np.ones(len(human)) if weights is None else np.asarray(weights, np.float64)
    column = meta.ROW_STATISTICS.index(name)

    def statistic(metrics: np.ndarray) -> np.ndarray:
        return _batched_row_statistic(
            np.ascontiguousarray(np.atleast_2d(metrics), np.float64),
            ranked.human,
            ranked.order,
            ranked.human_starts,
            ranked.human_rank,
            weights,
            column,
        )

    return statistic


def _members(group_of_row: np.ndarray) -> list[np.ndarray]:
    """The rows of each group, groups in increasing order."""
    group_of_row = np.asarray(group_of_row)
    order = np.argsort(group_of_row, kind="stable")
    bounds = np.flatnonzero(np.diff(np.r_[-1, group_of_row[order], -1]))
    return [order[start:end] for start, end in itertools.pairwise(bounds)]


def grouped_correlation(
    metric: np.ndarray, human: np.ndarray, group_of_row: np.ndarray, name: str
) -> float:
    """The statistic within each group (image), averaged over the groups where it is
    defined (a group whose metric or humans are constant is left out); NaN when none is."""
    metric, human = np.asarray(metric, np.float64), np.asarray(human, np.float64)
    column = meta.ROW_STATISTICS.index(name)
    values = []
    for rows in _members(group_of_row):
        if rows.size < 2:
            continue
        ranked = meta.RankedRows.of(metric[rows], human[rows])
        values.append(meta.row_statistics(ranked, np.ones(rows.size))[0, column])
    values = np.asarray(values)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


@dataclasses.dataclass(frozen=True)
class TieCalibrated:
    """Pairwise accuracy at ε = 0 and at the ε that maximises it (ties matter)."""

    accuracy: float
    accuracy_eq: float
    epsilon: float


def _pairs_within(group_of_item: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first item, second item, weight) of every pair within a group; each group's pairs
    weigh 1 / (its pairs × groups with pairs), so the accuracy is the mean over groups."""
    firsts, seconds, weights = [], [], []
    for items in _members(group_of_item):
        if items.size < 2:
            continue
        i, j = np.triu_indices(items.size, 1)
        firsts.append(items[i])
        seconds.append(items[j])
        weights.append(np.full(i.size, 1.0 / i.size))
    if not firsts:
        raise ValueError("no group holds two items: there is no pair to compare")
    weight = np.concatenate(weights)
    return np.concatenate(firsts), np.concatenate(seconds), weight / len(weights)


def tie_calibrated_accuracy(
    metric: np.ndarray, human: np.ndarray, group_of_item: np.ndarray | None = None
) -> TieCalibrated:
    """Pairwise accuracy (acc23) of ``metric`` against ``human`` over pairs of items within
    each group (all pairs when ``group_of_item`` is None), with and without tie
    calibration; ε is the smallest that reaches the best accuracy."""
    metric, human = np.asarray(metric, np.float64), np.asarray(human, np.float64)
    groups = np.zeros(metric.size, np.int64) if group_of_item is None else group_of_item
    i, j, weight = _pairs_within(np.asarray(groups))
    gap = np.abs(metric[i] - metric[j])
    human_tie = human[i] == human[j]
    concordant = np.sign(metric[i] - metric[j]) * np.sign(human[i] - human[j]) > 0
    order = np.argsort(gap, kind="stable")
    gap, human_tie, concordant, weight = (
        gap[order],
        human_tie[order],
        concordant[order],
        weight[order],
    )
    # Accuracy when every pair up to k is a metric tie: human ties tied so far, plus
    # concordant pairs beyond.
    tied_right = np.cumsum(weight * human_tie)
    concordant_left = (weight * concordant).sum() - np.cumsum(weight * concordant)
    last_of_gap = np.flatnonzero(np.r_[gap[1:] != gap[:-1], True])
    thresholds = gap[last_of_gap]
    accuracy = tied_right[last_of_gap] + concordant_left[last_of_gap]
    if thresholds[0] > 0:  # ε = 0 ties nothing: only the concordant pairs count
        thresholds = np.r_[0.0, thresholds]
        accuracy = np.r_[(weight * concordant).sum(), accuracy]
    best = int(np.argmax(accuracy >= accuracy.max() - 1e-12))  # float sums: first of the best
    return TieCalibrated(float(accuracy[0]), float(accuracy[best]), float(thresholds[best]))


# --------------------------------------------------------------------------- clusters


def significance_clusters(
    values: Mapping[str, float],
    p_better: Mapping[tuple[str, str], float],
    alpha: float = SIGNIFICANCE,
) -> dict[str, int]:
    """metric -> cluster rank (1 = best). ``p_better[a, b]``: the one-sided p-value that a
    beats b. Metrics are taken by decreasing value; one starts a new cluster when a metric
    of the current cluster beats it with p <= ``alpha``. A metric whose value is undefined
    (NaN) is left out."""
    names: Sequence[str] = sorted(
        (m for m in values if not np.isnan(values[m])), key=lambda m: -values[m]
    )
    ranks: dict[str, int] = {}
    rank, start = 1, 0
    for k, metric in enumerate(names):
        if any(p_better[names[above], metric] <= alpha for above in range(start, k)):
            rank, start = rank + 1, k
        ranks[metric] = rank
    return ranks
