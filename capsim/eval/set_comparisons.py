"""The MT field's comparisons between metrics on one scored judgment set.

The set's kind (``capsim.eval.judgment_kinds``, carried by the scored set's entry) says
what is compared and what swaps together (absolute sets: whole images over their rating
rows; PASCAL-50S: each pair's two candidates; a pair set or a labelled-caption set: all
of an image's rows) and what figures a metric gets beside its statistics (absolute sets:
the statistic item-grouped and pairwise accuracy with tie calibration).

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

from capsim.eval import perm_both as perm
from capsim.eval.judgment_harness import PERCENT, ScoredSet

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
    figures added: per metric the figures its kind adds, between metrics ``perm_both_p``
    (made where the bootstrap did not run), and the clusters of each test."""
    kind, statistic_name = scored.spec.kind, scored.spec.statistic
    metrics, compared = copy.deepcopy(dict(report)), copy.deepcopy(dict(comparisons))
    for metric, per_caption in scored.scores.items():
        metrics[metric].update(kind.metric_figures(scored.pairs, per_caption, statistic_name))
    rows, units, statistic = kind.compared_rows(scored.pairs, scored.scores, statistic_name)
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
