"""PERM-BOTH (Deutsch, Dror and Roth 2021; mt-metrics-eval's ``PermutationSigDiff``):
is one metric's agreement with the humans better than another's?

Each metric's scores are z-scored, then per resample each unit's scores are swapped
between the two metrics with probability ½ and the statistic recomputed for both
mixtures. The one-sided p-value that ``first`` beats ``second`` counts the resamples
whose difference is at least the observed one, with ``capsim.metrics.resampling``'s
convention (count + 1 over resamples + 1; the reference has no +1), checked every
``block_size`` resamples: below ``early_min`` or above ``early_max`` it stops early.
Swaps are drawn per *unit*: a row, or an image where a set has several rows per image
(its rows are not independent, as the bootstrap over images says too), so an image's
rows always move together. The row statistics (τc, τb, Spearman, Pearson) of both
mixtures are computed by merging the two metrics' presorted orders, without sorting
each resample again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numba
import numpy as np

from capsim.eval import weighted_agreement as weighted
from capsim.metrics import resampling

# mt-metrics-eval's PermutationSigDiffParams defaults.
PERM_BOTH_RESAMPLES = 1000
PERM_BOTH_BLOCK = 1000
EARLY_MIN = 0.02
EARLY_MAX = 0.5
# Humans with at most this many distinct scores get τ from a sweep over classes.
SWEEP_CLASSES = 32
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
            swap = resampling.swap_masks(rng, min(_CHUNK, block - start), units.max() + 1)
            mixtures = _mixtures(statistic, first, second, swap[:, units])
            differences = mixtures[:, 0] - mixtures[:, 1]
            differences = np.nan_to_num(differences)  # undefined on both sides: no difference
            at_least += int(resampling.reaching(differences, delta).sum())
            at_most += int(resampling.reaching(-differences, -delta).sum())
        done += block
        p = resampling.p_value(at_least, done)
        if done % block_size == 0 and not early_min <= p <= early_max:
            break
    return PermBoth(float(p), float(resampling.p_value(at_most, done)), delta, done)


def _mixtures(
    statistic: Statistic, first: np.ndarray, second: np.ndarray, swapped: np.ndarray
) -> np.ndarray:
    """[resamples, 2]: the statistic of (second where swapped else first) and of its
    complement; a statistic with a ``mixtures`` method computes them without the matrices."""
    if isinstance(statistic, RowStatistic):
        return statistic.mixtures(first, second, swapped)
    mixed_first = np.where(swapped, second, first)
    mixed_second = np.where(swapped, first, second)
    return np.stack([statistic(mixed_first), statistic(mixed_second)], axis=1)


# --------------------------------------------------------------------------- statistics


@numba.njit(cache=True, nogil=True)
def _merge_ranks(
    first, second, order_first, order_second, from_second, second_when, values, ranks, order
):
    """Each row takes ``second`` where ``from_second`` equals ``second_when``, else ``first``;
    writes the values, their dense ranks and the rows in value order, merging the two
    presorted orders in O(rows)."""
    n = first.size
    i = j = k = 0
    rank = -1
    last = 0.0
    while True:
        while i < n and from_second[order_first[i]] == second_when:
            i += 1
        while j < n and from_second[order_second[j]] != second_when:
            j += 1
        if i == n and j == n:
            return
        if j == n or (i < n and first[order_first[i]] <= second[order_second[j]]):
            row = order_first[i]
            value = first[row]
            i += 1
        else:
            row = order_second[j]
            value = second[row]
            j += 1
        if rank < 0 or value != last:
            rank += 1
            last = value
        values[row] = value
        ranks[row] = rank
        order[k] = row
        k += 1


@numba.njit(cache=True, nogil=True)
def _tau_sweep(order, ranks, human_class, classes, weights, column, human_present, human_tied):
    """τc (column 0) or τb (1) of rows visited in metric order, for humans of few distinct
    values: O(rows × classes), where the general kernel's Fenwick tree is O(rows log rows)."""
    below = np.zeros(classes)  # weight of the rows of each human class with a lower metric
    group = np.zeros(classes)
    concordant = discordant = total = metric_tied = 0.0
    start = 0
    n = order.size
    while start < n:
        end = start
        while end < n and ranks[order[end]] == ranks[order[start]]:
            end += 1
        group[:] = 0.0
        for k in range(start, end):
            row = order[k]
            c = human_class[row]
            w = weights[row]
            for h in range(c):
                concordant += w * below[h]
            for h in range(c + 1, classes):
                discordant += w * below[h]
            group[c] += w
        weight = group.sum()
        metric_tied += weight * (weight - 1.0) / 2.0
        total += weight
        below += group
        start = end
    metric_present = ranks[order[n - 1]] + 1 if n else 0
    if column == 0:
        kinds = min(metric_present, human_present)
        if kinds < 2:
            return np.nan
        return 2.0 * (concordant - discordant) / (total * total * (kinds - 1.0) / kinds)
    pairs = total * (total - 1.0) / 2.0
    denominator = (pairs - metric_tied) * (pairs - human_tied)
    return (concordant - discordant) / np.sqrt(denominator) if denominator > 0 else np.nan


@numba.njit(cache=True, nogil=True, parallel=True)
def _row_mixtures(
    first, second, swapped, human, order, human_starts, human_rank, weights, column
) -> np.ndarray:
    order_first = np.argsort(first, kind="mergesort")
    order_second = np.argsort(second, kind="mergesort")
    classes = human_rank.max() + 1
    sweep = column < 2 and classes <= SWEEP_CLASSES
    human_weight = np.zeros(classes)
    for row in range(human_rank.size):
        human_weight[human_rank[row]] += weights[row]
    human_present = (human_weight > 0).sum()
    human_tied = (human_weight * (human_weight - 1.0) / 2.0).sum()
    out = np.empty((swapped.shape[0], 2))
    for b in numba.prange(swapped.shape[0]):
        values = np.empty(first.size)
        ranks = np.empty(first.size, np.int64)
        metric_order = np.empty(first.size, np.int64)
        for side in range(2):
            # side 0: second where swapped; side 1: second where not swapped
            _merge_ranks(
                first,
                second,
                order_first,
                order_second,
                swapped[b],
                side == 0,
                values,
                ranks,
                metric_order,
            )
            if sweep:
                out[b, side] = _tau_sweep(
                    metric_order,
                    ranks,
                    human_rank,
                    classes,
                    weights,
                    column,
                    human_present,
                    human_tied,
                )
            else:
                out[b, side] = weighted.row_statistics_kernel(
                    values, human, order, human_starts, ranks, human_rank, weights
                )[column]
    return out


class RowStatistic:
    """One of ``weighted.ROW_STATISTICS`` (τc, τb, Spearman, Pearson) against ``human``, of
    each line of a [resamples, rows] matrix; ``weights`` counts each row's repeats."""

    def __init__(self, human: np.ndarray, name: str, weights: np.ndarray | None = None):
        if name not in weighted.ROW_STATISTICS:
            known = ", ".join(weighted.ROW_STATISTICS)
            raise ValueError(f"unknown statistic {name!r}; known: {known}")
        self.ranked = weighted.RankedRows.of(np.zeros(len(human)), human)
        self.weights = np.ones(len(human)) if weights is None else np.asarray(weights, float)
        self.column = weighted.ROW_STATISTICS.index(name)

    def _human(self) -> tuple:
        ranked = self.ranked
        return ranked.human, ranked.order, ranked.human_starts, ranked.human_rank, self.weights

    def __call__(self, metrics: np.ndarray) -> np.ndarray:
        metrics = np.atleast_2d(np.asarray(metrics, np.float64))
        unswapped = np.zeros((1, metrics.shape[1]), bool)
        return np.array([self.mixtures(line, line, unswapped)[0, 0] for line in metrics])

    def mixtures(self, first: np.ndarray, second: np.ndarray, swapped: np.ndarray) -> np.ndarray:
        """[resamples, 2]: the statistic of (second where swapped else first), then of its
        complement (first where swapped else second)."""
        return _row_mixtures(
            np.asarray(first, np.float64),
            np.asarray(second, np.float64),
            np.ascontiguousarray(swapped, np.bool_),
            *self._human(),
            self.column,
        )


def row_statistic(human: np.ndarray, name: str, weights: np.ndarray | None = None) -> RowStatistic:
    """The ``RowStatistic`` ``name`` against ``human`` (rows repeated ``weights`` times)."""
    return RowStatistic(human, name, weights)
