"""Sentence-similarity sets: SemEval STS 2012-2016 from a folder, SICK-R and STS-B.

Each reads its files once (capsim.data.sts) and needs nothing of a run but
``subject.embed`` (``text_only``), so a saved encoder is evaluated without its
training data. A missing file or folder skips the set with a warning (None).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from capsim.data import sts as sts_data
from capsim.eval import sts as sts_lib
from capsim.eval.evaluators.base import Subject

logger = logging.getLogger(__name__)


class Sts:
    """``sts_dir`` as laid out by capsim.data.sts.read_sts_dir; ``years`` limits it
    (``("STS16",)`` gives the paper's model-selection criterion, avg2016)."""

    text_only = True

    def __init__(self, sts_dir: str, years: Sequence[str] = ()):
        self.sts_dir, self.years = Path(sts_dir).expanduser(), tuple(years)
        self._data: dict | None = None

    def __call__(self, subject: Subject) -> dict[str, Any] | None:
        if not self.sts_dir.is_dir():
            logger.warning("STS skipped: %s is not a directory", self.sts_dir)
            return None
        if self._data is None:
            data = sts_data.read_sts_dir(self.sts_dir)
            self._data = {y: s for y, s in data.items() if not self.years or y in self.years}
        return sts_lib.evaluate_sts(subject.embed, self._data)


class _PairFile:
    """One scored file of sentence pairs: ``{"pearson", "spearman", "n"}`` (x100) of cosine
    similarity against its gold scores."""

    text_only = True

    def __init__(self, path: Path, read: Callable[[Path], sts_data.StsSubset]):
        self.path, self._read = path.expanduser(), read
        self._subset: sts_data.StsSubset | None = None

    def __call__(self, subject: Subject) -> dict[str, Any] | None:
        if not self.path.is_file():
            logger.warning("%s skipped: %s is not a file", type(self).__name__, self.path)
            return None
        if self._subset is None:
            self._subset = self._read(self.path)
        subset = self._subset
        # The harness's one-subset year: its subset entry is this file's result.
        result = sts_lib.evaluate_sts(subject.embed, {subset.year: [subset]})
        return result[subset.year]["subsets"][subset.name]


class SickR(_PairFile):
    """SICK relatedness from ``path``: ``SICK_test_annotated.txt``, or the full ``SICK.txt``,
    of which only the ``semeval_set`` part counts ("TEST" by default; "" for every pair)."""

    def __init__(self, path: str, semeval_set: str = "TEST"):
        super().__init__(Path(path), self._read_sick)
        self.semeval_set = semeval_set

    def _read_sick(self, path: Path) -> sts_data.StsSubset:
        with path.open(encoding="utf-8", errors="replace") as file:
            has_sets = sts_data.SICK_SET_COLUMN in file.readline().rstrip("\r\n").split("\t")
        return sts_data.read_sick(path, self.semeval_set if has_sets else None)


class StsBenchmark(_PairFile):
    """STS-B ``sts-{split}.csv`` under ``stsb_dir`` (the released ``stsbenchmark/`` folder)."""

    def __init__(self, stsb_dir: str, split: str = "test"):
        super().__init__(Path(stsb_dir) / f"sts-{split}.csv", sts_data.read_sts_benchmark)
