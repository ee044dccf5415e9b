"""The labelled-caption judgment sets: one human label a caption, flawed or not (HAT: does
it hallucinate?), and how well a metric's score separates the two.

- **AUROC** of the score against *not flawed* (a higher score should mean a clean
  caption): the share of (clean, flawed) caption pairs where the clean one scores higher,
  a tie counting half (the Mann-Whitney U statistic over the product of the counts).
- **Average precision** of finding the flawed captions by a *low* score: the captions
  ranked by increasing score, AP = Σₖ (Rₖ - Rₖ₋₁) Pₖ over the distinct scores k, with
  precision Pₖ and recall Rₖ of all captions scoring at most the k-th score. Captions
  with equal scores enter together, at one threshold: the convention of scikit-learn's
  ``average_precision_score`` (called with positives = flawed and ``-score``), with no
  interpolation. ``chance_average_precision`` is what a random ranking gets: the share
  of flawed captions.

Each is × 100. With resamples the *images* are drawn (each with all its captions;
``capsim.metrics.resampling``), every statistic gets its percentile interval and every
pair of metrics a paired bootstrap on the AUROC; PERM-BOTH swaps images too. A resample
is a count per caption, and the statistics are computed on the counts directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

from capsim.data.judgments import LabelJudgment
from capsim.eval import weighted_agreement as weighted
from capsim.eval.perm_both import Statistic
from capsim.metrics import resampling

LABEL_STATISTICS = ("auroc", "average_precision", "chance_average_precision")


@dataclasses.dataclass
class LabelledCaptions:
    """The captions as pycocoevalcap dicts (keys ``"0"``, ``"1"``, ... in the set's order),
    each one's human label (``flawed``), its image (numbered) and its row id."""

    gts: dict[str, list[str]]
    res: dict[str, list[str]]
    flawed: np.ndarray
    image_of_caption: np.ndarray
    ids: list[str]


def labelled_captions(judgments: Sequence[LabelJudgment]) -> LabelledCaptions:
    """Each judged caption once, against its own references."""
    keys = [str(k) for k in range(len(judgments))]
    images = np.unique([j.image_id for j in judgments], return_inverse=True)[1]
    return LabelledCaptions(
        {k: list(j.references) for k, j in zip(keys, judgments, strict=True)},
        {k: [j.candidate] for k, j in zip(keys, judgments, strict=True)},
        np.array([j.flawed for j in judgments], bool),
        images.astype(np.int64),
        [j.candidate_id for j in judgments],
    )


def label_statistics(scores: np.ndarray, flawed: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """[resamples, 3]: AUROC, average precision and its chance level (fractions, not × 100)
    of one metric's ``scores`` under each row of ``weights`` (a count per caption; a 1-D
    ``weights`` gives one line). NaN where a resample holds no flawed or no clean caption."""
    weights = np.atleast_2d(np.asarray(weights, np.float64))
    order = np.argsort(scores, kind="stable")
    ranked = np.asarray(scores, np.float64)[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])  # one group a score
    by_score = weights[:, order]
    bad = np.add.reduceat(by_score * flawed[order], starts, axis=1)  # ascending score
    good = np.add.reduceat(by_score * ~flawed[order], starts, axis=1)
    n_bad, n_good = bad.sum(1), good.sum(1)
    good_above = n_good[:, None] - np.cumsum(good, 1)
    found, taken = np.cumsum(bad, 1), np.cumsum(bad + good, 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        auroc = (bad * (good_above + 0.5 * good)).sum(1) / (n_bad * n_good)
        precision = np.where(taken > 0, found / np.where(taken > 0, taken, 1), 0.0)
        average_precision = (bad * precision).sum(1) / n_bad
        chance = n_bad / (n_bad + n_good)
    undefined = (n_bad == 0) | (n_good == 0)
    auroc[undefined] = average_precision[undefined] = np.nan
    return np.stack([auroc, average_precision, chance], axis=1)


def label_report(
    pairs: LabelledCaptions,
    scores: Mapping[str, np.ndarray],
    resamples: int = 0,
    seed: int = 0,
    confidence: float = weighted.DEFAULT_CONFIDENCE,
) -> tuple[dict[str, dict], dict]:
    """(per metric: LABEL_STATISTICS × 100; the comparisons between metrics on the AUROC,
    with ``resamples``: every value then has its interval over images)."""
    weights = (
        resampling.group_counts(np.random.default_rng(seed), pairs.image_of_caption, resamples)
        if resamples
        else None
    )
    ones = np.ones(pairs.flawed.size)
    report: dict[str, dict] = {}
    full_auroc, resampled_auroc = {}, {}
    for metric, per_caption in scores.items():
        full = label_statistics(per_caption, pairs.flawed, ones)[0]
        resampled = label_statistics(per_caption, pairs.flawed, weights) if resamples else None
        report[metric] = weighted.percent_summaries(full, resampled, LABEL_STATISTICS, confidence)
        full_auroc[metric] = full[0]
        resampled_auroc[metric] = resampled[:, 0] if resamples else None
    if not resamples:
        return report, {}
    comparisons = weighted.comparisons(full_auroc, resampled_auroc, confidence)
    return report, weighted.percent_comparisons(comparisons)


def label_rows(
    pairs: LabelledCaptions, scores: Mapping[str, np.ndarray]
) -> tuple[dict[str, np.ndarray], np.ndarray, Statistic]:
    """(scores, each caption's image, the AUROC of [resamples, captions] scores): the
    Mann-Whitney form over average ranks, ties counting half as in ``label_statistics``."""
    clean = ~pairs.flawed
    n_clean, n_bad = clean.sum(), pairs.flawed.sum()

    def auroc(metrics: np.ndarray) -> np.ndarray:
        ranks = stats.rankdata(metrics, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return (ranks[:, clean].sum(1) - n_clean * (n_clean + 1) / 2) / (n_clean * n_bad)

    return dict(scores), pairs.image_of_caption, auroc
