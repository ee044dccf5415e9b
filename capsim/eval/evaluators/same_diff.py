"""Same-image against different-image caption pairs of held-out images (AUC, Pearson)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from capsim.eval.evaluators.base import Subject
from capsim.eval.same_diff import DEFAULT_NUM_PAIRS, evaluate_same_diff, make_same_diff_pairs


class SameDiff:
    """``{"pearson", "auc", "n"}`` on ``num_pairs`` + ``num_pairs`` pairs of a split."""

    def __init__(self, split: str = "test", num_pairs: int = DEFAULT_NUM_PAIRS, seed: int = 0):
        self.split, self.num_pairs, self.seed = split, num_pairs, seed
        self._pairs: dict[int, list] = {}

    def pairs(self, subject: Subject) -> list:
        corpus = subject.split(self.split).corpus
        if id(corpus) not in self._pairs:  # drawn once per corpus, reused at every evaluation
            self._pairs[id(corpus)] = make_same_diff_pairs(
                corpus.texts_by_image(), num_pairs=self.num_pairs, seed=self.seed
            )
        return self._pairs[id(corpus)]

    def __call__(self, subject: Subject) -> dict[str, Any]:
        return evaluate_same_diff(subject.embed, self.pairs(subject))


class SameImage:
    """The early-stopping metric: ``{"same_image_auc", "same_image_pearson"}`` on dev captions.

    ``split`` may name several splits (one per domain, e.g. ``("dev_coco", "dev_flickr")``):
    the metric is then their mean, so no domain crowds out another, and each split's own
    ``same_image_auc_<split>`` is reported beside it.
    """

    def __init__(
        self,
        split: str | Sequence[str] = "dev",
        num_pairs: int = DEFAULT_NUM_PAIRS,
        seed: int = 0,
    ):
        self.splits = (split,) if isinstance(split, str) else tuple(split)
        self.pairs = {name: SameDiff(name, num_pairs, seed) for name in self.splits}

    def __call__(self, subject: Subject) -> dict[str, Any]:
        results = {name: evaluate(subject) for name, evaluate in self.pairs.items()}
        summary = {
            "same_image_auc": float(np.mean([r["auc"] for r in results.values()])),
            "same_image_pearson": float(np.mean([r["pearson"] for r in results.values()])),
        }
        if len(results) > 1:
            summary.update({f"same_image_auc_{name}": r["auc"] for name, r in results.items()})
        return summary
