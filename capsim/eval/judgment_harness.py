"""Caption metrics on a human-judgment set, scored once, and the set's report.

The metrics are the built-in ones (BLEU-1..4, ROUGE-L, CIDEr-D, METEOR), any
``compute_score(gts, res)`` scorer on raw captions (I2CE, a user's plug-in) and scores a
user computed beforehand, keyed by the set's row ids. The scored set carries its registry
entry, whose kind (``capsim.eval.judgment_kinds``) says which captions are scored and how
the set is reported: with resamples, every statistic gets a bootstrap interval over
images and every pair of metrics a paired test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from capsim.eval import weighted_agreement as weighted

# JudgedPairs and group_judgments are the absolute sets' (capsim.eval.absolute_sets); they
# are named here too for the benches and notebooks that group Flickr8k-Expert's ratings.
from capsim.eval.absolute_sets import JudgedPairs, group_judgments  # noqa: F401
from capsim.eval.correlation import kendall_tau
from capsim.eval.judgment_kinds import Captions
from capsim.eval.judgment_sets import JudgmentSet, as_judgment_set
from capsim.eval.plugged_metrics import ComputeScore, checked_scores, given_scores
from capsim.metrics.coco_metrics import BUILTIN_METRIC_NAMES, compute_caption_metrics
from capsim.metrics.tokenizer import ptb_tokenize

PERCENT = weighted.PERCENT


def metric_tokenized(
    gts: Mapping[str, list[str]], res: Mapping[str, list[str]]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """gts/res PTB-tokenised the way pycocoevalcap's n-gram metrics expect (each dict
    tokenised as one call, as pycocoevalcap's COCOEvalCap does)."""
    return ptb_tokenize(gts), ptb_tokenize(res)


def ngram_metric_scores(
    pairs: Captions, include_meteor: bool = True
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


@dataclasses.dataclass
class ScoredSet:
    """One judgment set's captions and every metric's score of each of them, scored once;
    ``spec`` is the set's registry entry, whose kind reports and compares it."""

    spec: JudgmentSet
    pairs: Captions
    scores: dict[str, np.ndarray]
    skipped: dict[str, str]

    @property
    def name(self) -> str:
        return self.spec.name


def score_set(
    spec: JudgmentSet | str,
    judgments: Sequence,
    scorers: Mapping[str, ComputeScore] = {},
    given: Mapping[str, Mapping[str, object]] = {},
    builtin: Sequence[str] = BUILTIN_METRIC_NAMES,
) -> ScoredSet:
    """The ``builtin`` n-gram metrics, each ``scorers[m]`` on the raw captions and each
    ``given[m]`` (row id -> score), in that order, on the set's unique captions. ``spec``:
    the set's registry entry (or its name)."""
    spec = as_judgment_set(spec)
    pairs, ids = spec.kind.captions(spec.name, judgments, spec.row_id)
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
                f"metric {metric!r} on {spec.name}: compute_score must return "
                f"(corpus score, per-caption scores), got {type(result).__name__}"
            )
        scores[metric] = checked_scores(metric, spec.name, ids, per_row)
    for metric, by_id in given.items():
        scores[metric] = given_scores(metric, spec.name, ids, by_id)
    return ScoredSet(spec, pairs, scores, skipped)


def set_report(
    scored: ScoredSet, resamples: int = 0, seed: int = 0, confidence: float = 0.95
) -> tuple[dict[str, dict], dict]:
    """(per metric: the set's statistics, the comparisons between metrics), each set under
    its kind's protocol; with ``resamples``, bootstrap intervals and paired tests (seeded)."""
    if resamples < 0:
        raise ValueError(f"resamples must be >= 0, got {resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    spec = scored.spec
    return spec.kind.report(
        scored.pairs, scored.scores, spec.statistic, resamples, seed, confidence
    )


def evaluate_judgments(
    spec: JudgmentSet | str,
    judgments: Sequence,
    compute_score: ComputeScore,
    include_meteor: bool,
) -> tuple[dict[str, dict], dict[str, str]]:
    """(per metric: the set's statistics × 100, metrics that could not run and why).

    The metrics are I2CE-style ``compute_score`` ("I2CE") beside BLEU-1..4,
    ROUGE-L, CIDEr and METEOR (capsim's compiled METEOR, no Java), all on the same pairs.
    """
    builtin = [m for m in BUILTIN_METRIC_NAMES if include_meteor or m != "METEOR"]
    scored = score_set(spec, judgments, {"I2CE": compute_score}, builtin=builtin)
    return set_report(scored)[0], scored.skipped
