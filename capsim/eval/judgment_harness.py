"""Caption-metric agreement with human judgments (CLIPScore protocol).

Judgments are grouped into unique (image, candidate) pairs so each metric
scores a pair once; each human rating is then its own row when correlating,
as in the CLIPScore paper's Flickr8k-Expert protocol.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from capsim.data.judgments import Judgment, PairJudgment
from capsim.errors import DataFormatError
from capsim.eval.correlation import (
    CORRELATIONS,
    MIN_SYSTEMS,
    kendall_tau,
    system_level_agreement,
)
from capsim.eval.judgment_sets import JudgmentProtocol, judgment_set
from capsim.metrics.coco_metrics import compute_caption_metrics
from capsim.metrics.tokenizer import ptb_tokenize

PERCENT = 100.0
# A scorer follows pycocoevalcap's contract: compute_score(gts, res) -> (corpus, per-caption).
ComputeScore = Callable[[Mapping[str, list[str]], Mapping[str, list[str]]], tuple]


@dataclasses.dataclass
class JudgedPairs:
    """Unique (image, candidate) pairs in pycocoevalcap dicts, plus one row per human rating.

    ``pair_of_rating[r]`` is the index in ``keys`` of the pair that rating r judged.
    """

    keys: list[str]
    gts: dict[str, list[str]]
    res: dict[str, list[str]]
    human: np.ndarray
    pair_of_rating: np.ndarray

    def tokenized(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """The same dicts PTB-tokenised the way pycocoevalcap's n-gram metrics expect."""
        return metric_tokenized(self.gts, self.res)


def metric_tokenized(
    gts: Mapping[str, list[str]], res: Mapping[str, list[str]]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """gts/res PTB-tokenised the way pycocoevalcap's n-gram metrics expect (each dict
    tokenised as one call, as pycocoevalcap's COCOEvalCap does)."""
    return ptb_tokenize(gts), ptb_tokenize(res)


def group_judgments(judgments: Sequence[Judgment]) -> JudgedPairs:
    """Collects ratings of the same (image, candidate) into one pair."""
    index: dict[tuple[str, str], int] = {}
    keys, gts, res = [], {}, {}
    pair_of_rating = np.empty(len(judgments), np.int64)
    for r, j in enumerate(judgments):
        pair = (j.image_id, j.candidate_id if j.candidate_id is not None else j.candidate)
        if pair not in index:
            key = str(len(index))
            index[pair] = len(index)
            keys.append(key)
            gts[key] = list(j.references)
            res[key] = [j.candidate]
        pair_of_rating[r] = index[pair]
    human = np.array([j.score for j in judgments], np.float64)
    return JudgedPairs(keys, gts, res, human, pair_of_rating)


def ngram_metric_scores(
    pairs: JudgedPairs | PreferencePairs, include_meteor: bool = True
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """BLEU-1..4, ROUGE-L, CIDEr and METEOR (capsim's Python METEOR) per candidate, in one call."""
    gts, res = metric_tokenized(pairs.gts, pairs.res)
    return compute_caption_metrics(gts, res, include_meteor=include_meteor)


def tau_c_table(pairs: JudgedPairs, scores: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Kendall τc × 100 of each metric against the human ratings, one row per rating."""
    return {
        name: PERCENT * kendall_tau(per_pair[pairs.pair_of_rating], pairs.human, variant="c")
        for name, per_pair in scores.items()
    }


# --------------------------------------------------------------------------- protocols
# An absolute set's statistic (its registry entry names it, and so do its reports) -> the
# entry of correlation.CORRELATIONS it stands for, of the metric with the human ratings.
STATISTICS = {"tau_c": "kendall_tau_c", "tau_b": "kendall_tau_b", "pearson": "pearson"}
PASCAL_REFERENCES = 5  # references sampled per pair, as in the CIDEr paper


def absolute_report(
    name: str, pairs: JudgedPairs, scores: Mapping[str, np.ndarray], systems: Sequence[str] = ()
) -> dict[str, dict]:
    """Per metric, the set's statistic × 100 against the ratings (and THumB's system level)."""
    statistic = judgment_set(name).statistic
    correlation = CORRELATIONS[STATISTICS[statistic]]
    report: dict[str, dict] = {}
    for metric, per_pair in scores.items():
        report[metric] = {
            statistic: PERCENT * correlation(per_pair[pairs.pair_of_rating], pairs.human)
        }
    if systems:
        row_systems = [systems[i] for i in pairs.pair_of_rating]
        if len(set(row_systems)) >= MIN_SYSTEMS:
            per_row = {m: s[pairs.pair_of_rating] for m, s in scores.items()}
            agreement = system_level_agreement(per_row, pairs.human, row_systems)
            for metric, values in agreement.items():
                report[metric]["system_pearson"] = PERCENT * values["pearson"]
                report[metric]["system_kendall_tau_b"] = PERCENT * values["kendall_tau_b"]
    return report


@dataclasses.dataclass
class PreferencePairs:
    """PASCAL-50S pairs as pycocoevalcap dicts: keys ``{i}a`` and ``{i}b`` share references."""

    gts: dict[str, list[str]]
    res: dict[str, list[str]]
    preference: np.ndarray  # fraction of humans preferring a
    categories: list[str]


def preference_pairs(
    judgments: Sequence[PairJudgment], num_references: int = PASCAL_REFERENCES, seed: int = 0
) -> PreferencePairs:
    """Both candidates of each pair against the same ``num_references`` references,
    sampled without replacement with a fixed seed (all of them when there are fewer)."""
    rng = np.random.default_rng(seed)
    gts, res = {}, {}
    for i, j in enumerate(judgments):
        refs = list(j.references)
        if len(refs) > num_references:
            refs = [refs[k] for k in sorted(rng.choice(len(refs), num_references, replace=False))]
        for side, candidate in (("a", j.candidate_a), ("b", j.candidate_b)):
            gts[f"{i}{side}"], res[f"{i}{side}"] = refs, [candidate]
    preference = np.array([j.preference for j in judgments], np.float64)
    return PreferencePairs(gts, res, preference, [j.category for j in judgments])


def pascal_report(pairs: PreferencePairs, scores: Mapping[str, np.ndarray]) -> dict[str, dict]:
    """Accuracy × 100 per category and their mean: the metric agrees with the human majority.

    Pairs without a majority (exactly half the votes) are left out; a metric tie
    counts half. ``scores[m]`` is in ``pairs.res`` order (a, b, a, b, ...).
    """
    decided = pairs.preference != 0.5
    human_a = pairs.preference > 0.5
    categories = np.array(pairs.categories)
    report: dict[str, dict] = {}
    for metric, per_candidate in scores.items():
        a, b = per_candidate[0::2], per_candidate[1::2]
        agree = np.where(a == b, 0.5, (a > b) == human_a)
        per_category = {
            category: PERCENT * float(agree[decided & (categories == category)].mean())
            for category in sorted(set(pairs.categories))
            if np.any(decided & (categories == category))
        }
        report[metric] = {**per_category, "mean": float(np.mean(list(per_category.values())))}
    return report


def evaluate_judgments(
    name: str,
    judgments: Sequence[Judgment] | Sequence[PairJudgment],
    compute_score: ComputeScore,
    include_meteor: bool,
) -> tuple[dict[str, dict], dict[str, str]]:
    """(per metric: the set's statistics × 100, metrics that could not run and why).

    The metrics are I2CE-style ``compute_score`` ("I2CE") beside BLEU-1..4,
    ROUGE-L, CIDEr and METEOR (capsim's Python METEOR, no Java), all on the same pairs.
    """
    pairwise = judgment_set(name).protocol is JudgmentProtocol.PAIRWISE
    if pairwise:
        pairs = preference_pairs(judgments)
    else:
        missing = next((j for j in judgments if not j.references), None)
        if missing is not None:
            raise DataFormatError(name, f"image {missing.image_id!r} has no references")
        pairs = group_judgments(judgments)
    scores, skipped = ngram_metric_scores(pairs, include_meteor=include_meteor)
    scores["I2CE"] = np.asarray(compute_score(pairs.gts, pairs.res)[1], np.float64)
    if pairwise:
        return pascal_report(pairs, scores), skipped
    systems = [""] * len(pairs.keys)
    for judgment, pair in zip(judgments, pairs.pair_of_rating, strict=True):
        systems[pair] = judgment.system or ""
    return absolute_report(name, pairs, scores, systems if any(systems) else ()), skipped
