"""Agreement within each item (image), as mt-metrics-eval measures it beside the pooled one.

- Item-grouped correlation: the statistic within each image, averaged over the images
  where it is defined (mt-metrics-eval drops NaNs too), against the pooled one.
- Pairwise accuracy with tie calibration, ``acc_eq`` (Deutsch et al. 2023, "Ties
  Matter"; mt-metrics-eval's ``acc23``): over pairs of candidates, a pair counts when
  the metric orders it as the humans do, or when both tie; a metric difference of at
  most ε counts as a metric tie, and ε is searched to maximise the accuracy. Without
  calibration ε = 0. Item-grouped: the accuracy of each image's pairs, averaged.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from capsim.eval import weighted_agreement as weighted


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
    column = weighted.ROW_STATISTICS.index(name)
    values = []
    for rows in _members(group_of_row):
        if rows.size < 2:
            continue
        ranked = weighted.RankedRows.of(metric[rows], human[rows])
        values.append(weighted.row_statistics(ranked, np.ones(rows.size))[0, column])
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
