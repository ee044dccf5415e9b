"""The MT field's statistics (capsim.eval.significance) on one scored judgment set.

Absolute sets: PERM-BOTH on the set's statistic over its rating rows, swapping whole
images; beside each metric's pooled statistic, its item-grouped one (within each image,
averaged) and its pairwise accuracy over candidates of the same image, with and without
tie calibration (candidates scored by their mean rating; a set with one candidate an
image compares all its candidates, up to ``POOLED_LIMIT`` of them). Rating rows that repeat
a (candidate, rating) are one row with their count (``JudgedPairs.distinct_rows``).
Pairwise sets: PERM-BOTH on the set's accuracy, swapping each pair's
two candidates together (all pairs of an image together where the set names images).

Every pair of metrics gets ``perm_both_p`` in both directions; the metrics are ranked
into significance clusters by each test that ran (PERM-BOTH; with a bootstrap, the
paired bootstrap and, on absolute sets, Williams, their two-sided p-values halved into
one-sided ones).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from capsim.eval import meta_statistics as meta
from capsim.eval import significance as sig
from capsim.eval.judgment_harness import PAIR_SET_STATISTIC, JudgedPairs, ScoredSet
from capsim.eval.judgment_sets import judgment_set
from capsim.eval.pairwise_sets import PreferencePairs

# Sets with one candidate an image compare all pairs of candidates: at most this many.
POOLED_LIMIT = 4000


def _one_sided(two_sided: float, delta: float) -> float:
    """The one-sided p-value that the metric with difference ``delta`` is the better."""
    return two_sided / 2 if delta > 0 else 1 - two_sided / 2


def _candidate_groups(image_of_pair: np.ndarray) -> np.ndarray | None:
    """The groups pairwise accuracy compares candidates within: their images where an image
    has several; else one group of all, up to POOLED_LIMIT candidates; else None (skipped)."""
    if np.bincount(image_of_pair).max() > 1:
        return image_of_pair
    return np.zeros_like(image_of_pair) if image_of_pair.size <= POOLED_LIMIT else None


def _absolute_statistic(pairs: JudgedPairs, name: str):
    """(pair of each row, image of each row, the statistic of [resamples, rows]) over the
    unique (pair, rating) rows, each weighted by how often it occurs."""
    pair_of_row, human, ratings = pairs.distinct_rows()
    statistic = sig.row_statistic(human, name, ratings)
    return pair_of_row, pairs.image_of_pair[pair_of_row], statistic


def _pairwise_statistic(name: str, pairs: PreferencePairs) -> tuple[np.ndarray, Callable]:
    """(unit of each candidate, the set's accuracy of each line of [resamples, candidates])."""
    pair_units = np.unique(pairs.images, return_inverse=True)[1]
    if judgment_set(name).statistic == PAIR_SET_STATISTIC:

        def share(metrics: np.ndarray) -> np.ndarray:
            return (metrics[:, 0::2] > metrics[:, 1::2]).mean(1)

        return np.repeat(pair_units, 2), share
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

    return np.repeat(np.arange(len(pairs.preference)), 2), mean_accuracy


def set_significance(
    scored: ScoredSet,
    report: dict[str, dict],
    comparisons: dict[str, dict],
    permutations: int,
    seed: int = 0,
    block_size: int = sig.PERM_BOTH_BLOCK,
    alpha: float = sig.SIGNIFICANCE,
) -> dict[str, dict[str, int]]:
    """Adds the field's statistics to ``report`` (per metric) and ``perm_both_p`` to
    ``comparisons`` (made where the bootstrap did not run), in place; returns the
    significance clusters of each test that ran: test -> metric -> rank."""
    statistic_name = judgment_set(scored.name).statistic
    if isinstance(scored.pairs, JudgedPairs):
        pairs = scored.pairs
        pair_of_row, units, statistic = _absolute_statistic(pairs, statistic_name)
        rows = {m: s[pair_of_row] for m, s in scored.scores.items()}
        image_of_rating = pairs.image_of_pair[pairs.pair_of_rating]
        mean_rating = np.bincount(pairs.pair_of_rating, pairs.human) / np.bincount(
            pairs.pair_of_rating
        )
        candidate_groups = _candidate_groups(pairs.image_of_pair)
        for metric, per_pair in scored.scores.items():
            grouped = sig.grouped_correlation(
                per_pair[pairs.pair_of_rating], pairs.human, image_of_rating, statistic_name
            )
            report[metric][f"{statistic_name}_item_grouped"] = meta.PERCENT * grouped
            if candidate_groups is not None:
                accuracy = sig.tie_calibrated_accuracy(per_pair, mean_rating, candidate_groups)
                report[metric].update(
                    {
                        "pairwise_accuracy": meta.PERCENT * accuracy.accuracy,
                        "acc_eq": meta.PERCENT * accuracy.accuracy_eq,
                        "acc_eq_epsilon": accuracy.epsilon,
                    }
                )
    else:
        units, statistic = _pairwise_statistic(scored.name, scored.pairs)
        rows = dict(scored.scores)
    values = {m: float(statistic(v[None])[0]) for m, v in rows.items()}
    clusters: dict[str, dict[str, int]] = {}
    if permutations and len(rows) > 1:
        p_better = {}
        for k, (a, b) in enumerate(itertools.combinations(rows, 2)):
            if values[b] > values[a]:
                a, b = b, a  # the better first, as the reference's early stop expects
            result = sig.perm_both(
                rows[a], rows[b], statistic, units, permutations, block_size, seed=seed + k
            )
            p_better[a, b], p_better[b, a] = result.p, result.p_reverse
            for first, second, p in ((a, b, result.p), (b, a, result.p_reverse)):
                delta = meta.PERCENT * (values[first] - values[second])
                entry = comparisons.setdefault(first, {}).setdefault(second, {"delta": delta})
                entry["perm_both_p"] = p
                entry["perm_both_resamples"] = result.resamples
        clusters["perm_both"] = sig.significance_clusters(values, p_better, alpha)
    for test, key in (("bootstrap", "p_value"), ("williams", "p_value_williams")):
        p_better = {
            (a, b): _one_sided(entry[key], entry["delta"])
            for a, others in comparisons.items()
            for b, entry in others.items()
            if key in entry
        }
        if p_better and len(p_better) == len(rows) * (len(rows) - 1):
            clusters[test] = sig.significance_clusters(values, p_better, alpha)
    return clusters
