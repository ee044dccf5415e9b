"""SemEval STS 2012-2016 from a folder: Pearson/Spearman per subset, per-year means, avg2016."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from capsim.eval import sts as sts_lib
from capsim.eval.evaluators.base import Subject


class Sts:
    """``sts_dir`` as laid out by capsim.eval.sts.read_sts_dir; ``years`` limits it
    (``("STS16",)`` gives the paper's model-selection criterion, avg2016)."""

    def __init__(self, sts_dir: str, years: Sequence[str] = ()):
        self.sts_dir, self.years = Path(sts_dir).expanduser(), tuple(years)
        self._data: dict | None = None

    def __call__(self, subject: Subject) -> dict[str, Any] | None:
        if not self.sts_dir.is_dir():
            logging.getLogger(__name__).warning("STS skipped: %s is not a directory", self.sts_dir)
            return None
        if self._data is None:
            data = sts_lib.read_sts_dir(self.sts_dir)
            self._data = {y: s for y, s in data.items() if not self.years or y in self.years}
        return sts_lib.evaluate_sts(subject.embed, self._data)
