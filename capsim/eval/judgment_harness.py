"""Caption-metric agreement with human judgments (CLIPScore protocol).

Judgments are grouped into unique (image, candidate) pairs so each metric
scores a pair once; each human rating is then its own row when correlating,
as in the CLIPScore paper's Flickr8k-Expert protocol.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from capsim.data.judgments import Judgment
from capsim.eval.coco_metrics import compute_caption_metrics
from capsim.eval.correlation import kendall_tau
from capsim.text import tokenize_for_metrics

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

        def tok(s: str) -> str:
            return " ".join(tokenize_for_metrics(s))

        gts = {k: [tok(r) for r in refs] for k, refs in self.gts.items()}
        res = {k: [tok(c) for c in cands] for k, cands in self.res.items()}
        return gts, res


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
    pairs: JudgedPairs, include_meteor: bool = True
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """BLEU-1..4, ROUGE-L, CIDEr (and METEOR with Java) per pair, all pairs in one call."""
    gts, res = pairs.tokenized()
    return compute_caption_metrics(gts, res, include_meteor=include_meteor)


def score_pairs(pairs: JudgedPairs, compute_score: ComputeScore) -> np.ndarray:
    """Per-pair scores from any pycocoevalcap-style scorer on the raw text."""
    _, scores = compute_score(pairs.gts, pairs.res)
    return np.asarray(scores, np.float64)


def tau_c_table(pairs: JudgedPairs, scores: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Kendall τc × 100 of each metric against the human ratings, one row per rating."""
    return {
        name: PERCENT * kendall_tau(per_pair[pairs.pair_of_rating], pairs.human, variant="c")
        for name, per_pair in scores.items()
    }
