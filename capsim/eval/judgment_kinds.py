"""The judgment kinds: what the humans gave, and every rule that follows from it.

A kind is an object (the ``JudgmentKind`` Protocol) that a registry entry holds
(``capsim.eval.judgment_sets.JudgmentSet.kind``) and a scored set carries
(``capsim.eval.judgment_harness.ScoredSet.spec``). It says how a set of its kind is
scored (the unique captions to score, and their row ids), reported (its statistics with
bootstrap intervals and the paired comparisons between metrics), compared (the rows,
units and statistic of PERM-BOTH, and any figures a metric gets beside its statistics)
and which statistics may head its report. No other module branches on a set's kind or
name: a new kind is a class here (or anywhere: the Protocol is all that is asked) and
an entry that holds it.

The kinds of the registry:

- ``ABSOLUTE``: a score per (image, candidate), correlated with the metric over rating
  rows (``capsim.eval.absolute_sets``);
- ``VOTED_PAIRS``: votes between two candidates against five sampled references
  (PASCAL-50S), the accuracy at picking the majority per category
  (``capsim.eval.pairwise_sets``);
- ``BETTER_WORSE``: a better and a worse caption against all their references, the share
  of pairs the metric orders right (``capsim.eval.pairwise_sets``);
- ``CAPTION_LABELS``: one label a caption, flawed or not (HAT), AUROC and average
  precision (``capsim.eval.label_sets``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from capsim.data.judgments import Judgment, LabelJudgment, PairJudgment
from capsim.errors import DataFormatError
from capsim.eval import absolute_sets, label_sets, pairwise_sets
from capsim.eval.perm_both import Statistic

Report = tuple[dict[str, dict], dict]  # (metric -> statistic -> value, comparisons)
# (each metric's per-row scores, the unit each row is swapped with, the statistic)
ComparedRows = tuple[dict[str, np.ndarray], np.ndarray, Statistic]


class Captions(Protocol):
    """What a kind scores: pycocoevalcap's dicts, key -> references and key -> [caption]."""

    gts: dict[str, list[str]]
    res: dict[str, list[str]]


@runtime_checkable
class JudgmentKind(Protocol):
    """What the humans gave, which decides how a metric is scored and compared with them.

    ``name``: the kind's name in the manual; ``record``: the judgment record its sets'
    readers return; ``statistics``: those a set of the kind may head its report with.
    """

    name: str
    record: type
    statistics: tuple[str, ...]

    def captions(
        self, set_name: str, judgments: Sequence[Any], row_id: Callable[[Any], str] | None
    ) -> tuple[Captions, list[str]]:
        """(the captions to score, once each; their row ids in ``res`` order)."""
        ...

    def report(
        self,
        captions: Any,
        scores: Mapping[str, np.ndarray],
        statistic: str,
        resamples: int,
        seed: int,
        confidence: float,
    ) -> Report:
        """(per metric its statistics × 100, ``statistic`` first; with ``resamples``,
        intervals, and the comparisons between metrics on ``statistic``)."""
        ...

    def metric_figures(
        self, captions: Any, per_caption: np.ndarray, statistic: str
    ) -> dict[str, float]:
        """Figures a metric gets beside its statistics (none for most kinds)."""
        ...

    def compared_rows(
        self, captions: Any, scores: Mapping[str, np.ndarray], statistic: str
    ) -> ComparedRows:
        """What PERM-BOTH compares: the rows, the unit each is swapped with, the statistic."""
        ...


class _NoFigures:
    """A kind whose metrics get no figures beside their statistics."""

    def metric_figures(
        self, captions: Any, per_caption: np.ndarray, statistic: str
    ) -> dict[str, float]:
        return {}


class AbsoluteRatings:
    """A score per (image, candidate): τc, τb, Spearman and Pearson over rating rows."""

    name = "absolute"
    record = Judgment
    statistics = absolute_sets.STATISTICS

    def captions(
        self,
        set_name: str,
        judgments: Sequence[Judgment],
        row_id: Callable[[Judgment], str] | None,
    ) -> tuple[absolute_sets.JudgedPairs, list[str]]:
        missing = next((j for j in judgments if not j.references), None)
        if missing is not None:
            raise DataFormatError(set_name, f"image {missing.image_id!r} has no references")
        pairs = absolute_sets.group_judgments(judgments, row_id)
        return pairs, pairs.ids

    def report(
        self,
        captions: absolute_sets.JudgedPairs,
        scores: Mapping[str, np.ndarray],
        statistic: str,
        resamples: int,
        seed: int,
        confidence: float,
    ) -> Report:
        return absolute_sets.absolute_report(
            statistic, captions, scores, resamples, seed, confidence
        )

    def metric_figures(
        self, captions: absolute_sets.JudgedPairs, per_caption: np.ndarray, statistic: str
    ) -> dict[str, float]:
        return absolute_sets.item_figures(captions, per_caption, statistic)

    def compared_rows(
        self, captions: absolute_sets.JudgedPairs, scores: Mapping[str, np.ndarray], statistic: str
    ) -> ComparedRows:
        return absolute_sets.absolute_rows(captions, scores, statistic)


class _Pairs(_NoFigures):
    """What both pair kinds share: both candidates of a pair against the same references
    (``references`` of them sampled, or all when None), keyed {pair}a and {pair}b."""

    record = PairJudgment
    references: int | None

    def captions(
        self, set_name: str, judgments: Sequence[PairJudgment], row_id: Callable[[Any], str] | None
    ) -> tuple[pairwise_sets.PreferencePairs, list[str]]:
        del set_name, row_id  # a pair's candidates are keyed {pair}a and {pair}b
        pairs = pairwise_sets.preference_pairs(judgments, self.references)
        return pairs, list(pairs.res)


class VotedPairs(_Pairs):
    """Votes between two candidates (PASCAL-50S): five references sampled a pair, the
    accuracy at picking the majority per category and their mean."""

    name = "voted pairs"
    statistics = ("mean",)
    references = pairwise_sets.PASCAL_REFERENCES

    def report(
        self,
        captions: pairwise_sets.PreferencePairs,
        scores: Mapping[str, np.ndarray],
        statistic: str,
        resamples: int,
        seed: int,
        confidence: float,
    ) -> Report:
        return pairwise_sets.pascal_report(captions, scores, resamples, seed, confidence)

    def compared_rows(
        self,
        captions: pairwise_sets.PreferencePairs,
        scores: Mapping[str, np.ndarray],
        statistic: str,
    ) -> ComparedRows:
        return pairwise_sets.voted_pair_rows(captions, scores)


class BetterWorsePairs(_Pairs):
    """A better and a worse caption against all their references: the share of pairs the
    metric scores better above worse, over all pairs and per category."""

    name = "better-worse pairs"
    statistics = ("accuracy",)
    references = None  # every reference kept

    def report(
        self,
        captions: pairwise_sets.PreferencePairs,
        scores: Mapping[str, np.ndarray],
        statistic: str,
        resamples: int,
        seed: int,
        confidence: float,
    ) -> Report:
        return pairwise_sets.pair_set_report(captions, scores, resamples, seed, confidence)

    def compared_rows(
        self,
        captions: pairwise_sets.PreferencePairs,
        scores: Mapping[str, np.ndarray],
        statistic: str,
    ) -> ComparedRows:
        return pairwise_sets.better_worse_rows(captions, scores)


class CaptionLabels(_NoFigures):
    """One label a caption, flawed or not (HAT): AUROC of the score against not flawed,
    average precision of finding the flawed by a low score, and its chance level."""

    name = "labelled captions"
    record = LabelJudgment
    statistics = ("auroc",)

    def captions(
        self, set_name: str, judgments: Sequence[LabelJudgment], row_id: Callable[[Any], str] | None
    ) -> tuple[label_sets.LabelledCaptions, list[str]]:
        del set_name, row_id  # each caption's record names its row id
        captions = label_sets.labelled_captions(judgments)
        return captions, captions.ids

    def report(
        self,
        captions: label_sets.LabelledCaptions,
        scores: Mapping[str, np.ndarray],
        statistic: str,
        resamples: int,
        seed: int,
        confidence: float,
    ) -> Report:
        return label_sets.label_report(captions, scores, resamples, seed, confidence)

    def compared_rows(
        self,
        captions: label_sets.LabelledCaptions,
        scores: Mapping[str, np.ndarray],
        statistic: str,
    ) -> ComparedRows:
        return label_sets.label_rows(captions, scores)


ABSOLUTE = AbsoluteRatings()
VOTED_PAIRS = VotedPairs()
BETTER_WORSE = BetterWorsePairs()
CAPTION_LABELS = CaptionLabels()
