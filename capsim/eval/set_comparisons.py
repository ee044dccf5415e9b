"""The MT field's comparisons between metrics on one scored judgment set.

The set's registry ``kind`` decides what is compared and what swaps together:

- absolute sets: PERM-BOTH on the set's statistic over its rating rows, swapping whole
  images; beside each metric's pooled statistic, its item-grouped one and its pairwise
  accuracy over candidates of the same image, with and without tie calibration
  (``capsim.eval.item_agreement``; candidates scored by their mean rating; a set with one
  candidate an image compares all its candidates, up to ``POOLED_LIMIT`` of them).
  Rating rows that repeat a (candidate, rating) are one row with their count
  (``JudgedPairs.distinct_rows``);
- voted pairs (PASCAL-50S): PERM-BOTH on the mean accuracy over categories, swapping
  each pair's two candidates together;
- better-worse pairs: PERM-BOTH on the share of pairs ordered right, swapping all pairs
  of an image together.

Every pair of metrics gets ``perm_both_p`` in both directions; the metrics are ranked
into significance clusters (mt-metrics-eval's ``AssignRanks``: sorted by their statistic,
a metric starts a new cluster only when some metric of the current cluster beats it
significantly) by each test that ran: PERM-BOTH and, with a bootstrap, the paired
bootstrap and, on absolute sets, Williams, their two-sided p-values halved into one-sided
ones.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from capsim.eval import item_agreement
from capsim.eval import perm_both as perm
from capsim.eval.judgment_harness import PERCENT, JudgedPairs, ScoredSet
from capsim.eval.judgment_sets import JudgmentKind, judgment_set
from capsim.eval.pairwise_sets import PreferencePairs

# Sets with one candidate an image compare all pairs of candidates: at most this many.
POOLED_LIMIT = 4000
SIGNIFICANCE = 0.05  # the clusters' one-sided level


@dataclasses.dataclass
class SetComparisons:
    """A set's report with the field's figures added: per metric its statistics
    (``metrics``), between metrics the tests (``comparisons``), and the significance
    clusters of each test that ran (test -> metric -> rank)."""

    metrics: dict[str, dict]
    comparisons: dict[str, dict]
    clusters: dict[str, dict[str, int]]


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


def _one_sided(two_sided: float, delta: float) -> float:
    """The one-sided p-value that the metric with difference ``delta`` is the better."""
    return two_sided / 2 if delta > 0 else 1 - two_sided / 2


def _candidate_groups(image_of_pair: np.ndarray) -> np.ndarray | None:
    """The groups pairwise accuracy compares candidates within: their images where an image
    has several; else one group of all, up to POOLED_LIMIT candidates; else None (skipped)."""
    if np.bincount(image_of_pair).max() > 1:
        return image_of_pair
    return np.zeros_like(image_of_pair) if image_of_pair.size <= POOLED_LIMIT else None


def _item_figures(pairs: JudgedPairs, per_pair: np.ndarray, statistic: str) -> dict[str, float]:
    """A metric's statistic item-grouped and its pairwise accuracy (acc_eq and its ε)."""
    image_of_rating = pairs.image_of_pair[pairs.pair_of_rating]
    grouped = item_agreement.grouped_correlation(
        per_pair[pairs.pair_of_rating], pairs.human, image_of_rating, statistic
    )
    figures = {f"{statistic}_item_grouped": PERCENT * grouped}
    candidate_groups = _candidate_groups(pairs.image_of_pair)
    if candidate_groups is not None:
        mean_rating = np.bincount(pairs.pair_of_rating, pairs.human) / np.bincount(
            pairs.pair_of_rating
        )
        accuracy = item_agreement.tie_calibrated_accuracy(per_pair, mean_rating, candidate_groups)
        figures.update(
            {
                "pairwise_accuracy": PERCENT * accuracy.accuracy,
                "acc_eq": PERCENT * accuracy.accuracy_eq,
                "acc_eq_epsilon": accuracy.epsilon,
            }
        )
    return figures


def _absolute_rows(pairs: JudgedPairs, scores: Mapping[str, np.ndarray], statistic: str):
    """(each metric's rows, the image of each row, the statistic of [resamples, rows]) over
    the unique (pair, rating) rows, each weighted by how often it occurs."""
    pair_of_row, human, ratings = pairs.distinct_rows()
    rows = {m: s[pair_of_row] for m, s in scores.items()}
    return rows, pairs.image_of_pair[pair_of_row], perm.row_statistic(human, statistic, ratings)


def _voted_pair_rows(pairs: PreferencePairs, scores: Mapping[str, np.ndarray]):
    """(scores, each candidate's pair, the mean over categories of the accuracy at picking
    the humans' majority, a metric tie counting half, ties of the humans left out)."""
    decided = pairs.preference != 0.5
    human_a = pairs.preference[decided] > 0.5
    names = sorted(set(pairs.categories))
    category = np.array([names.index(c) for c in pairs.categories])[decided]
    one_hot = np.eye(len(names))[category]
    one_hot = one_hot[:, one_hot.sum(0) > 0] / one_hot.sum(0)[one_hot.sum(0) > 0]

    def mean_accuracy(metrics: np.ndarray) -> np.ndarray:
        a, b = metrics[:, 0::2][:, decided], metrics[:, 1::2][:, decided]
        agree = np.where(a == b, 0.5, (a > b) == human_a)
        return (agree @ one_hot).mean(1)

    return dict(scores), np.repeat(np.arange(len(pairs.preference)), 2), mean_accuracy


def _better_worse_rows(pairs: PreferencePairs, scores: Mapping[str, np.ndarray]):
    """(scores, each candidate's image, the share of pairs whose better caption (a) the
    metric scores above the worse (b))."""

    def share(metrics: np.ndarray) -> np.ndarray:
        return (metrics[:, 0::2] > metrics[:, 1::2]).mean(1)

    image_of_pair = np.unique(pairs.images, return_inverse=True)[1]
    return dict(scores), np.repeat(image_of_pair, 2), share


def _perm_both_comparisons(
    rows: Mapping[str, np.ndarray],
    units: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    values: Mapping[str, float],
    comparisons: dict[str, dict],
    permutations: int,
    seed: int,
    block_size: int,
) -> dict[tuple[str, str], float]:
    """PERM-BOTH between every pair of metrics, written into ``comparisons``; returns the
    one-sided p-value that each metric beats each other."""
    p_better = {}
    for k, (a, b) in enumerate(itertools.combinations(rows, 2)):
        if values[b] > values[a]:
            a, b = b, a  # the better first, as the reference's early stop expects
        result = perm.perm_both(
            rows[a], rows[b], statistic, units, permutations, block_size, seed=seed + k
        )
        p_better[a, b], p_better[b, a] = result.p, result.p_reverse
        for first, second, p in ((a, b, result.p), (b, a, result.p_reverse)):
            delta = PERCENT * (values[first] - values[second])
            entry = comparisons.setdefault(first, {}).setdefault(second, {"delta": delta})
            entry["perm_both_p"] = p
            entry["perm_both_resamples"] = result.resamples
    return p_better


def compare_metrics(
    scored: ScoredSet,
    report: Mapping[str, dict],
    comparisons: Mapping[str, dict],
    permutations: int,
    seed: int = 0,
    block_size: int = perm.PERM_BOTH_BLOCK,
    alpha: float = SIGNIFICANCE,
) -> SetComparisons:
    """``report`` and ``comparisons`` (``set_report``'s, left as they are) with the field's
    figures added: per metric the item figures of absolute sets, between metrics
    ``perm_both_p`` (made where the bootstrap did not run), and the clusters of each test."""
    spec = judgment_set(scored.name)
    metrics, compared = copy.deepcopy(dict(report)), copy.deepcopy(dict(comparisons))
    if spec.kind is JudgmentKind.ABSOLUTE:
        for metric, per_pair in scored.scores.items():
            metrics[metric].update(_item_figures(scored.pairs, per_pair, spec.statistic))
        rows, units, statistic = _absolute_rows(scored.pairs, scored.scores, spec.statistic)
    elif spec.kind is JudgmentKind.VOTED_PAIRS:
        rows, units, statistic = _voted_pair_rows(scored.pairs, scored.scores)
    else:
        rows, units, statistic = _better_worse_rows(scored.pairs, scored.scores)
    values = {m: float(statistic(v[None])[0]) for m, v in rows.items()}
    clusters: dict[str, dict[str, int]] = {}
    if permutations and len(rows) > 1:
        p_better = _perm_both_comparisons(
            rows, units, statistic, values, compared, permutations, seed, block_size
        )
        clusters["perm_both"] = significance_clusters(values, p_better, alpha)
    for test, key in (("bootstrap", "p_value"), ("williams", "p_value_williams")):
        p_better = {
            (a, b): _one_sided(entry[key], entry["delta"])
            for a, others in compared.items()
            for b, entry in others.items()
            if key in entry
        }
        if p_better and len(p_better) == len(rows) * (len(rows) - 1):
            clusters[test] = significance_clusters(values, p_better, alpha)
    return SetComparisons(metrics, compared, clusters)
