"""A caption scorer against human judgments, beside BLEU-1..4, ROUGE-L, CIDEr and METEOR."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from capsim.data.judgments import Judgment
from capsim.eval.evaluators.base import Subject
from capsim.eval.judgment_sets import judgment_set, load_set


class Judgments:
    """``set``: a name of ``capsim.eval.judgment_sets.JUDGMENT_SETS``, either
    "shapes_world" (the world's rule-based candidate quality) or a published set
    read from ``path``.

    Returns, per metric, the set's statistic × 100 under the metric's name (Kendall
    τc for Flickr8k-Expert, mean accuracy for PASCAL-50S, ...) and any further
    statistics as ``"<metric>/<statistic>"``.
    """

    def __init__(
        self, set: str, path: str = "", references: str = "", include_meteor: bool = False
    ):
        self.judgment_set = judgment_set(set)  # an unknown name fails here, at config time
        self.set, self.path, self.references = set, path, references
        self.include_meteor = include_meteor

    def _judgments(self, subject: Subject) -> list | None:
        if self.judgment_set.read is None:  # the shapes world: built from the run, not read
            if subject.world is None:
                return None
            return [
                Judgment(c.image_id, c.text, f"{c.image_id}:{i}", c.references, c.quality)
                for i, c in enumerate(subject.world.candidates)
            ]
        if not self.path or not Path(self.path).expanduser().exists():
            logging.getLogger(__name__).warning(
                "%s skipped: %r does not exist", self.set, self.path
            )
            return None
        return load_set(self.judgment_set, Path(self.path).expanduser(), self.references or None)

    def __call__(self, subject: Subject) -> dict[str, Any] | None:
        judgments = self._judgments(subject)
        if judgments is None:
            return None
        statistic = self.judgment_set.statistic
        # Imported here: its statistics (numba, scipy) took 1.2-1.6 s of every training
        # command's start, and only a run that evaluates judgments needs them.
        from capsim.eval import judgment_harness as harness

        report, skipped = harness.evaluate_judgments(
            self.judgment_set, judgments, subject.compute_score, self.include_meteor
        )
        for metric, reason in skipped.items():
            logging.getLogger(__name__).info("%s not reported: %s", metric, reason)
        flat = {}
        for metric, values in report.items():
            flat[metric] = values[statistic]
            flat.update({f"{metric}/{k}": v for k, v in values.items() if k != statistic})
        return flat
