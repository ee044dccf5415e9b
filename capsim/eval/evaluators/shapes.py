"""The shapes world's own checks: graded and synonym pairs (Spearman) and same/diff scenes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from capsim.eval import sts as sts_lib
from capsim.eval.evaluators.base import Embed, Subject
from capsim.eval.same_diff import evaluate_same_diff

PERCENT = 100.0


def _pair_spearman(embed: Embed, pairs: Sequence) -> float:
    sims = sts_lib.embed_pairs(
        embed, [p.text_a for p in pairs], [p.text_b for p in pairs], "shapes pairs"
    )
    return PERCENT * float(stats.spearmanr(sims, np.array([p.score for p in pairs])).statistic)


class ShapesWorldPairs:
    def __call__(self, subject: Subject) -> dict[str, Any] | None:
        world = subject.world
        if world is None:
            return None
        same_diff = evaluate_same_diff(
            subject.embed, [(p.text_a, p.text_b, int(p.score)) for p in world.same_diff_pairs]
        )
        return {
            "graded_spearman": _pair_spearman(subject.embed, world.graded_pairs),
            "synonym_spearman": _pair_spearman(subject.embed, world.synonym_pairs),
            "same_diff_auc": same_diff["auc"],
            "same_diff_pearson": same_diff["pearson"],
        }
