"""The pairwise judgment sets: which of two captions is better, and how often a metric agrees.

PASCAL-50S follows the CIDEr paper: five references sampled per pair, the human
majority of its votes, a metric tie counted half, accuracy per category (HC, HI, HM,
MM) and their mean, pairs resampled within each category. A generic pair set (long
captions, say) is a share of pairs: the metric must score ``better`` above ``worse``
(a tie counts as wrong), over all pairs and per category, with every reference kept
and images resampled (pairs that name no image are each their own).

PERM-BOTH swaps each PASCAL-50S pair's two candidates together (on the mean accuracy
over categories), and all pairs of an image together in a generic pair set (on the share
of pairs ordered right).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from capsim.data.judgments import PairJudgment
from capsim.eval import weighted_agreement as weighted
from capsim.eval.perm_both import Statistic
from capsim.metrics import resampling

PASCAL_REFERENCES = 5  # references sampled per pair, as in the CIDEr paper


@dataclasses.dataclass
class PreferencePairs:
    """PASCAL-50S pairs as pycocoevalcap dicts: keys ``{i}a`` and ``{i}b`` share references."""

    gts: dict[str, list[str]]
    res: dict[str, list[str]]
    preference: np.ndarray  # fraction of humans preferring a
    categories: list[str]
    images: list[str]


def preference_pairs(
    judgments: Sequence[PairJudgment], num_references: int | None = PASCAL_REFERENCES, seed: int = 0
) -> PreferencePairs:
    """Both candidates of each pair against the same ``num_references`` references,
    sampled without replacement with a fixed seed (all of them when there are fewer, or
    when ``num_references`` is None)."""
    rng = np.random.default_rng(seed)
    gts, res = {}, {}
    for i, j in enumerate(judgments):
        refs = list(j.references)
        if num_references is not None and len(refs) > num_references:
            refs = [refs[k] for k in sorted(rng.choice(len(refs), num_references, replace=False))]
        for side, candidate in (("a", j.candidate_a), ("b", j.candidate_b)):
            gts[f"{i}{side}"], res[f"{i}{side}"] = refs, [candidate]
    preference = np.array([j.preference for j in judgments], np.float64)
    categories, images = [j.category for j in judgments], [j.image_id for j in judgments]
    return PreferencePairs(gts, res, preference, categories, images)


def pascal_report(
    pairs: PreferencePairs,
    scores: Mapping[str, np.ndarray],
    resamples: int = 0,
    seed: int = 0,
    confidence: float = weighted.DEFAULT_CONFIDENCE,
) -> tuple[dict[str, dict], dict]:
    """Accuracy × 100 per category and their mean: the metric agrees with the human
    majority. With ``resamples``, pairs are resampled within each category.

    Pairs without a majority (exactly half the votes) are left out; a metric tie
    counts half. ``scores[m]`` is in ``pairs.res`` order (a, b, a, b, ...).
    """
    decided = pairs.preference != 0.5
    human_a = pairs.preference[decided] > 0.5
    names = sorted({c for c, d in zip(pairs.categories, decided, strict=True) if d})
    category = np.array(
        [names.index(c) for c, d in zip(pairs.categories, decided, strict=True) if d]
    )
    columns = [*names, "mean"]
    weights = (
        resampling.group_counts(
            np.random.default_rng(seed), np.arange(category.size), resamples, category
        )
        if resamples
        else None
    )

    def accuracies(agree: np.ndarray, w: np.ndarray) -> np.ndarray:
        return weighted.pairwise_accuracy(agree, category, w)

    def agreement(per_candidate: np.ndarray) -> np.ndarray:
        a, b = per_candidate[0::2][decided], per_candidate[1::2][decided]
        return np.where(a == b, 0.5, (a > b) == human_a)

    return _agreement_report(scores, agreement, accuracies, weights, columns, "mean", confidence)


def pair_set_report(
    pairs: PreferencePairs,
    scores: Mapping[str, np.ndarray],
    resamples: int = 0,
    seed: int = 0,
    confidence: float = weighted.DEFAULT_CONFIDENCE,
) -> tuple[dict[str, dict], dict]:
    """The share × 100 of pairs where the metric scores ``better`` (a) above ``worse`` (b),
    a tie counting as wrong: over all pairs, then per category where there are several.
    With ``resamples``, images are resampled, each bringing its pairs."""
    names = sorted(set(pairs.categories))
    category = np.array([names.index(c) for c in pairs.categories])
    image_of_pair = np.unique(pairs.images, return_inverse=True)[1]
    columns = ["accuracy", *names] if len(names) > 1 else ["accuracy"]
    weights = (
        resampling.group_counts(np.random.default_rng(seed), image_of_pair, resamples)
        if resamples
        else None
    )

    def shares(agree: np.ndarray, w: np.ndarray) -> np.ndarray:
        w = np.atleast_2d(w)
        overall = (w * agree).sum(1) / w.sum(1)
        per_category = weighted.pairwise_accuracy(agree, category, w)[:, :-1]
        return np.c_[overall, per_category][:, : len(columns)]

    def agreement(per_candidate: np.ndarray) -> np.ndarray:
        return (per_candidate[0::2] > per_candidate[1::2]).astype(np.float64)

    return _agreement_report(scores, agreement, shares, weights, columns, "accuracy", confidence)


def _agreement_report(
    scores: Mapping[str, np.ndarray],
    agreement: Callable[[np.ndarray], np.ndarray],
    summary: Callable[[np.ndarray, np.ndarray], np.ndarray],
    weights: np.ndarray | None,
    columns: list[str],
    statistic: str,
    confidence: float,
) -> tuple[dict[str, dict], dict]:
    """Per metric: ``summary`` (one value a column) of its pairs' ``agreement`` with the
    humans, then with each line of ``weights`` (the resamples); and the comparisons
    between metrics on the ``statistic`` column."""
    column = columns.index(statistic)
    report: dict[str, dict] = {}
    full_statistic, resampled_statistic = {}, {}
    for metric, per_candidate in scores.items():
        agree = agreement(per_candidate)
        full = summary(agree, np.ones(agree.size))[0]
        resampled = summary(agree, weights) if weights is not None else None
        report[metric] = weighted.percent_summaries(full, resampled, columns, confidence)
        full_statistic[metric] = full[column]
        resampled_statistic[metric] = resampled[:, column] if weights is not None else None
    if weights is None:
        return report, {}
    comparisons = weighted.comparisons(full_statistic, resampled_statistic, confidence)
    return report, weighted.percent_comparisons(comparisons)


def voted_pair_rows(
    pairs: PreferencePairs, scores: Mapping[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], np.ndarray, Statistic]:
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


def better_worse_rows(
    pairs: PreferencePairs, scores: Mapping[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], np.ndarray, Statistic]:
    """(scores, each candidate's image, the share of pairs whose better caption (a) the
    metric scores above the worse (b))."""

    def share(metrics: np.ndarray) -> np.ndarray:
        return (metrics[:, 0::2] > metrics[:, 1::2]).mean(1)

    image_of_pair = np.unique(pairs.images, return_inverse=True)[1]
    return dict(scores), np.repeat(image_of_pair, 2), share
