"""The absolute judgment sets: a human score per (image, candidate), correlated with a metric.

Judgments are grouped into unique (image, candidate) pairs so each metric scores a
pair once; each human rating is then its own row when correlating, as in the
CLIPScore paper's Flickr8k-Expert protocol. The report gives τc, τb, Spearman and
Pearson over the rating rows (the set's statistic first), the system level where the
set names 3 or more systems, and with resamples intervals over images, paired bootstrap
and Williams' tests. Beside them, the set's statistic item-grouped and pairwise accuracy
over candidates of one image, with and without tie calibration (``capsim.eval.
item_agreement``; candidates scored by their mean rating; a set with one candidate an
image compares all its candidates, up to ``POOLED_LIMIT`` of them). PERM-BOTH swaps
whole images over the unique (candidate, rating) rows, each weighted by how often it
occurs (``JudgedPairs.distinct_rows``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from capsim.data.judgments import Judgment
from capsim.eval import item_agreement
from capsim.eval import perm_both as perm
from capsim.eval import weighted_agreement as weighted
from capsim.eval.correlation import MIN_SYSTEMS
from capsim.metrics import resampling
from capsim.metrics.tokenizer import ptb_tokenize

PERCENT = weighted.PERCENT
# The names of an absolute set's statistics in its reports; the set's own comes first.
STATISTICS = weighted.ROW_STATISTICS
# Sets with one candidate an image compare all pairs of candidates: at most this many.
POOLED_LIMIT = 4000


@dataclasses.dataclass
class JudgedPairs:
    """Unique (image, candidate) pairs in pycocoevalcap dicts, plus one row per human rating.

    ``pair_of_rating[r]`` is the index in ``keys`` of the pair that rating r judged;
    ``ids[p]`` is pair p's row id in the set's own terms (``JudgmentSet.row_id``),
    ``image_of_pair[p]`` numbers its image, ``systems[p]`` names its captioning system
    ("" when the set names none).
    """

    keys: list[str]
    gts: dict[str, list[str]]
    res: dict[str, list[str]]
    human: np.ndarray
    pair_of_rating: np.ndarray
    ids: list[str]
    image_of_pair: np.ndarray
    systems: list[str]

    def distinct_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pair, human score, how many ratings) of each distinct (pair, rating): the rating
        rows with their repeats counted, which gives every row statistic unchanged in half
        the rows (Flickr8k-Expert's three experts often agree)."""
        keys = np.stack([self.pair_of_rating, self.human])
        unique, counts = np.unique(keys, axis=1, return_counts=True)
        return unique[0].astype(np.int64), unique[1], counts.astype(np.float64)

    def tokenized(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """gts and res PTB-tokenised the way pycocoevalcap's n-gram metrics expect (each dict
        tokenised as one call, as pycocoevalcap's COCOEvalCap does)."""
        return ptb_tokenize(self.gts), ptb_tokenize(self.res)


def group_judgments(
    judgments: Sequence[Judgment], row_id: Callable[[Judgment], str] | None = None
) -> JudgedPairs:
    """Collects ratings of the same (image, candidate) into one pair. ``row_id`` names a
    pair in the set's terms (default: "IMAGE CANDIDATE_ID")."""
    index: dict[tuple[str, str], int] = {}
    images: dict[str, int] = {}
    keys, gts, res, ids, image_of_pair, systems = [], {}, {}, [], [], []
    pair_of_rating = np.empty(len(judgments), np.int64)
    for r, j in enumerate(judgments):
        pair = (j.image_id, j.candidate_id if j.candidate_id is not None else j.candidate)
        if pair not in index:
            key = str(len(index))
            index[pair] = len(index)
            keys.append(key)
            gts[key] = list(j.references)
            res[key] = [j.candidate]
            ids.append(row_id(j) if row_id else f"{pair[0]} {pair[1]}")
            image_of_pair.append(images.setdefault(j.image_id, len(images)))
            systems.append(j.system or "")
        pair_of_rating[r] = index[pair]
    human = np.array([j.score for j in judgments], np.float64)
    return JudgedPairs(
        keys, gts, res, human, pair_of_rating, ids, np.array(image_of_pair, np.int64), systems
    )


def absolute_report(
    statistic: str,
    pairs: JudgedPairs,
    scores: Mapping[str, np.ndarray],
    resamples: int = 0,
    seed: int = 0,
    confidence: float = weighted.DEFAULT_CONFIDENCE,
) -> tuple[dict[str, dict], dict]:
    """(per metric: τc, τb, Spearman and Pearson × 100, ``statistic`` first, plus the
    system level where the set names 3 or more systems; the comparisons between metrics
    on ``statistic``, with ``resamples``: every value then has its interval)."""
    columns = [statistic, *(s for s in STATISTICS if s != statistic)]
    column_of = [STATISTICS.index(c) for c in columns]
    rows_of, human, ones = pairs.distinct_rows()  # ones: each row's ratings
    weights = (
        resampling.group_counts(
            np.random.default_rng(seed), pairs.image_of_pair[rows_of], resamples
        )
        * ones
        if resamples
        else None
    )
    system_names = sorted(set(pairs.systems) - {""})
    with_systems = len(system_names) >= MIN_SYSTEMS
    if with_systems:
        system_of_pair = np.array([system_names.index(s) for s in pairs.systems])
    report: dict[str, dict] = {}
    full_statistic, resampled_statistic = {}, {}
    for metric, per_pair in scores.items():
        rows = weighted.RankedRows.of(per_pair[rows_of], human)
        full = weighted.row_statistics(rows, ones)[0][column_of]
        resampled = weighted.row_statistics(rows, weights)[:, column_of] if resamples else None
        report[metric] = weighted.percent_summaries(full, resampled, columns, confidence)
        full_statistic[metric] = full[0]
        resampled_statistic[metric] = resampled[:, 0] if resamples else None
        if with_systems:
            args = (per_pair[rows_of], human, system_of_pair[rows_of])
            system_full = weighted.system_statistics(*args, ones)[0]
            system_resampled = weighted.system_statistics(*args, weights) if resamples else None
            report[metric].update(
                weighted.percent_summaries(
                    system_full, system_resampled, weighted.SYSTEM_STATISTICS, confidence
                )
            )
    if not resamples:
        return report, {}
    per_row = {m: s[pairs.pair_of_rating] for m, s in scores.items()}  # a row per rating
    ratings = np.ones(pairs.human.size)
    pearson = {m: weighted.RankedRows.of(v, pairs.human) for m, v in per_row.items()}
    r_human = {m: weighted.row_statistics(r, ratings)[0][3] for m, r in pearson.items()}
    williams = {
        (a, b): weighted.williams_test(
            r_human[a], r_human[b], _pearson(per_row[a], per_row[b]), ratings.size
        )[1]
        for a in scores
        for b in scores
        if a != b
    }
    comparisons = weighted.comparisons(full_statistic, resampled_statistic, confidence, williams)
    return report, weighted.percent_comparisons(comparisons)


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson of two metrics' row scores (1 for two copies, 0 when one is constant)."""
    if np.array_equal(x, y):
        return 1.0
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def _candidate_groups(image_of_pair: np.ndarray) -> np.ndarray | None:
    """The groups pairwise accuracy compares candidates within: their images where an image
    has several; else one group of all, up to POOLED_LIMIT candidates; else None (skipped)."""
    if np.bincount(image_of_pair).max() > 1:
        return image_of_pair
    return np.zeros_like(image_of_pair) if image_of_pair.size <= POOLED_LIMIT else None


def item_figures(pairs: JudgedPairs, per_pair: np.ndarray, statistic: str) -> dict[str, float]:
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


def absolute_rows(
    pairs: JudgedPairs, scores: Mapping[str, np.ndarray], statistic: str
) -> tuple[dict[str, np.ndarray], np.ndarray, perm.RowStatistic]:
    """(each metric's rows, the image of each row, the statistic of [resamples, rows]) over
    the unique (pair, rating) rows, each weighted by how often it occurs."""
    pair_of_row, human, ratings = pairs.distinct_rows()
    rows = {m: s[pair_of_row] for m, s in scores.items()}
    return rows, pairs.image_of_pair[pair_of_row], perm.row_statistic(human, statistic, ratings)
