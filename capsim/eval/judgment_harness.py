"""Caption-metric agreement with human judgments, each set under its published protocol.

Judgments are grouped into unique (image, candidate) pairs so each metric scores a
pair once; each human rating is then its own row when correlating, as in the
CLIPScore paper's Flickr8k-Expert protocol. The metrics are the built-in ones
(BLEU-1..4, ROUGE-L, CIDEr-D, METEOR), any ``compute_score(gts, res)`` scorer on raw
captions (I2CE, a user's plug-in) and scores a user computed beforehand, keyed by the
set's row ids. With resamples, every statistic gets a bootstrap interval over images
and every pair of metrics a paired test (``capsim.eval.weighted_agreement``). A set's
registry ``kind`` alone decides how it is scored and reported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from capsim.data.judgments import Judgment, PairJudgment
from capsim.errors import DataFormatError
from capsim.eval import weighted_agreement as weighted
from capsim.eval.correlation import MIN_SYSTEMS, kendall_tau
from capsim.eval.judgment_sets import JudgmentKind, judgment_set
from capsim.eval.pairwise_sets import (
    PASCAL_REFERENCES,
    PreferencePairs,
    pair_set_report,
    pascal_report,
    preference_pairs,
)
from capsim.eval.plugged_metrics import ComputeScore, checked_scores, given_scores
from capsim.metrics import resampling
from capsim.metrics.coco_metrics import BUILTIN_METRIC_NAMES, compute_caption_metrics
from capsim.metrics.tokenizer import ptb_tokenize

PERCENT = weighted.PERCENT


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
        """The same dicts PTB-tokenised the way pycocoevalcap's n-gram metrics expect."""
        return metric_tokenized(self.gts, self.res)


def metric_tokenized(
    gts: Mapping[str, list[str]], res: Mapping[str, list[str]]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """gts/res PTB-tokenised the way pycocoevalcap's n-gram metrics expect (each dict
    tokenised as one call, as pycocoevalcap's COCOEvalCap does)."""
    return ptb_tokenize(gts), ptb_tokenize(res)


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


def ngram_metric_scores(
    pairs: JudgedPairs | PreferencePairs, include_meteor: bool = True
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """BLEU-1..4, ROUGE-L, CIDEr and METEOR (capsim's compiled METEOR) per candidate, in one
    call."""
    gts, res = metric_tokenized(pairs.gts, pairs.res)
    return compute_caption_metrics(gts, res, include_meteor=include_meteor)


def tau_c_table(pairs: JudgedPairs, scores: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Kendall τc × 100 of each metric against the human ratings, one row per rating."""
    return {
        name: PERCENT * kendall_tau(per_pair[pairs.pair_of_rating], pairs.human, variant="c")
        for name, per_pair in scores.items()
    }


# --------------------------------------------------------------------------- metrics


@dataclasses.dataclass
class ScoredSet:
    """One judgment set's pairs and every metric's score of each of them, scored once."""

    name: str
    pairs: JudgedPairs | PreferencePairs
    scores: dict[str, np.ndarray]
    skipped: dict[str, str]


def score_set(
    name: str,
    judgments: Sequence[Judgment] | Sequence[PairJudgment],
    scorers: Mapping[str, ComputeScore] = {},
    given: Mapping[str, Mapping[str, object]] = {},
    builtin: Sequence[str] = BUILTIN_METRIC_NAMES,
) -> ScoredSet:
    """The ``builtin`` n-gram metrics, each ``scorers[m]`` on the raw captions and each
    ``given[m]`` (row id -> score), in that order, on the set's unique pairs."""
    spec = judgment_set(name)
    pairs: JudgedPairs | PreferencePairs
    if spec.kind is JudgmentKind.VOTED_PAIRS:
        pairs = preference_pairs(judgments, PASCAL_REFERENCES)
        ids = list(pairs.res)
    elif spec.kind is JudgmentKind.BETTER_WORSE:
        pairs = preference_pairs(judgments, None)  # every reference kept
        ids = list(pairs.res)
    else:
        missing = next((j for j in judgments if not j.references), None)
        if missing is not None:
            raise DataFormatError(name, f"image {missing.image_id!r} has no references")
        pairs = group_judgments(judgments, spec.row_id)
        ids = pairs.ids
    scores: dict[str, np.ndarray] = {}
    skipped: dict[str, str] = {}
    if builtin:
        computed, skipped = ngram_metric_scores(pairs, include_meteor="METEOR" in builtin)
        scores.update({m: computed[m] for m in builtin if m in computed})
    for metric, compute_score in scorers.items():
        result = compute_score(pairs.gts, pairs.res)
        per_row = result[1] if isinstance(result, tuple) and len(result) == 2 else None
        if per_row is None:
            raise ValueError(
                f"metric {metric!r} on {name}: compute_score must return "
                f"(corpus score, per-caption scores), got {type(result).__name__}"
            )
        scores[metric] = checked_scores(metric, name, ids, per_row)
    for metric, by_id in given.items():
        scores[metric] = given_scores(metric, name, ids, by_id)
    return ScoredSet(name, pairs, scores, skipped)


# --------------------------------------------------------------------------- protocols
# The names of an absolute set's statistics in its reports; the set's own comes first.
STATISTICS = weighted.ROW_STATISTICS


def absolute_report(
    name: str,
    pairs: JudgedPairs,
    scores: Mapping[str, np.ndarray],
    resamples: int = 0,
    seed: int = 0,
    confidence: float = weighted.DEFAULT_CONFIDENCE,
) -> tuple[dict[str, dict], dict]:
    """(per metric: τc, τb, Spearman and Pearson × 100, the set's statistic first, plus the
    system level where the set names 3 or more systems; the comparisons between metrics
    on the set's statistic, with ``resamples``: every value then has its interval)."""
    statistic = judgment_set(name).statistic
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


def set_report(
    scored: ScoredSet, resamples: int = 0, seed: int = 0, confidence: float = 0.95
) -> tuple[dict[str, dict], dict]:
    """(per metric: the set's statistics, the comparisons between metrics), each set under
    its protocol; with ``resamples``, bootstrap intervals and paired tests (seeded)."""
    if resamples < 0:
        raise ValueError(f"resamples must be >= 0, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    kind = judgment_set(scored.name).kind
    if kind is JudgmentKind.VOTED_PAIRS:
        return pascal_report(scored.pairs, scored.scores, resamples, seed, confidence)
    if kind is JudgmentKind.BETTER_WORSE:
        return pair_set_report(scored.pairs, scored.scores, resamples, seed, confidence)
    return absolute_report(scored.name, scored.pairs, scored.scores, resamples, seed, confidence)


def evaluate_judgments(
    name: str,
    judgments: Sequence[Judgment] | Sequence[PairJudgment],
    compute_score: ComputeScore,
    include_meteor: bool,
) -> tuple[dict[str, dict], dict[str, str]]:
    """(per metric: the set's statistics × 100, metrics that could not run and why).

    The metrics are I2CE-style ``compute_score`` ("I2CE") beside BLEU-1..4,
    ROUGE-L, CIDEr and METEOR (capsim's compiled METEOR, no Java), all on the same pairs.
    """
    builtin = [m for m in BUILTIN_METRIC_NAMES if include_meteor or m != "METEOR"]
    scored = score_set(name, judgments, {"I2CE": compute_score}, builtin=builtin)
    return set_report(scored)[0], scored.skipped
