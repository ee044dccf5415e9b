"""Same-image against different-image caption pairs of held-out images (AUC, Pearson)."""

from __future__ import annotations

from typing import Any

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


class SameImage(SameDiff):
    """The early-stopping metric: ``{"same_image_auc", "same_image_pearson"}`` on dev captions."""

    def __init__(self, split: str = "dev", num_pairs: int = DEFAULT_NUM_PAIRS, seed: int = 0):
        super().__init__(split, num_pairs, seed)

    def __call__(self, subject: Subject) -> dict[str, Any]:
        result = super().__call__(subject)
        return {"same_image_auc": result["auc"], "same_image_pearson": result["pearson"]}
