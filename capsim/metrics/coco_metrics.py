"""The COCO caption metrics in one call, saying which could not run and why.

BLEU, ROUGE-L and CIDEr come from capsim.metrics.bleu, .rouge and .cider (pure Python/NumPy).
METEOR 1.5 comes from capsim.metrics.meteor (compiled by numba, no Java), which reads
METEOR's data files from the installed pycocoevalcap; ``engine="jar"`` runs
pycocoevalcap's meteor-1.5.jar through Java instead, as the oracle the Python
one is checked against. SPICE is never offered, because pycocoevalcap's
SPICE downloads Stanford CoreNLP on first use and this library must work
offline. Skipped metrics are reported, not silently dropped from tables.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from capsim.errors import CaptionError
from capsim.metrics import bootstrap, meteor
from capsim.metrics.bleu import Bleu
from capsim.metrics.cider import CiderD
from capsim.metrics.cider_idf import CorpusIdf
from capsim.metrics.ngram_counts import (
    DEFAULT_MAX_ORDER,
    Candidates,
    References,
    pair_ngrams,
    paired_captions,
)
from capsim.metrics.rouge import Rouge

JAVA_EXECUTABLE = "java"
PYCOCOEVALCAP_MODULE = "pycocoevalcap"
# METEOR's stdin protocol separates fields with " ||| " and records with newlines.
METEOR_FIELD_SEPARATOR = "|||"


MeteorEngine = Literal["python", "jar"]


@dataclasses.dataclass(frozen=True)
class BuiltinMetric:
    """A built-in caption metric: its name in tables and judgment reports, and its key in
    pycocoevalcap's ``COCOEvalCap.eval``."""

    name: str
    coco_key: str


# The built-in caption metrics, in pycocoevalcap's order: the one list that the drop-in
# (capsim.metrics.cocoeval), compute_caption_metrics and the judgment harness read. SPICE
# is pycocoevalcap's Java, run by the drop-in only where it is installed.
BUILTIN_METRICS = (
    BuiltinMetric("BLEU-1", "Bleu_1"),
    BuiltinMetric("BLEU-2", "Bleu_2"),
    BuiltinMetric("BLEU-3", "Bleu_3"),
    BuiltinMetric("BLEU-4", "Bleu_4"),
    BuiltinMetric("METEOR", "METEOR"),
    BuiltinMetric("ROUGE-L", "ROUGE_L"),
    BuiltinMetric("CIDEr", "CIDEr"),
)
BUILTIN_METRIC_NAMES = tuple(m.name for m in BUILTIN_METRICS)


class MetricUnavailable(RuntimeError):
    """A metric cannot run in this environment (missing Java or package)."""


def meteor_unavailable_reason(engine: MeteorEngine = "python") -> str | None:
    """Why METEOR cannot run with ``engine`` here, or None when it can."""
    if engine == "python":
        try:
            meteor.resources.locate_files()
        except meteor.MeteorResourceError as error:
            return str(error)
        return None
    if engine != "jar":
        raise ValueError(f"unknown METEOR engine {engine!r}; known: 'python', 'jar'")
    missing = []
    if shutil.which(JAVA_EXECUTABLE) is None:
        missing.append("Java ('java' is not on PATH; install a JRE)")
    if importlib.util.find_spec(PYCOCOEVALCAP_MODULE) is None:
        missing.append("pycocoevalcap (pip install pycocoevalcap==1.2, a dependency of capsim)")
    if not missing:
        return None
    return "METEOR needs pycocoevalcap's meteor-1.5.jar run by Java; missing: " + ", ".join(missing)


def meteor_available(engine: MeteorEngine = "python") -> bool:
    """True when METEOR's data files are installed (``jar``: and Java is on PATH)."""
    return meteor_unavailable_reason(engine) is None


def spice_unavailable_reason() -> str:
    """Why SPICE is never computed here."""
    return (
        "SPICE is not offered: pycocoevalcap's SPICE downloads Stanford CoreNLP "
        "(about 1 GB) on first use, and scoring here must work offline"
    )


def compute_meteor(gts: References, res: Candidates, engine: MeteorEngine = "python") -> np.ndarray:
    """Per-caption METEOR 1.5, in the order of ``res``: capsim's Python METEOR, or
    pycocoevalcap's jar through Java with ``engine="jar"``.

    Raises MetricUnavailable when the data files (or, for the jar, Java) are
    missing, and CaptionError for a caption that would corrupt METEOR's line
    protocol.
    """
    reason = meteor_unavailable_reason(engine)
    if reason is not None:
        raise MetricUnavailable(reason)
    ids, candidates, references = paired_captions(gts, res)
    for caption_id, candidate, refs in zip(ids, candidates, references, strict=True):
        for text in (candidate, *refs):
            if "\n" in text or "\r" in text or METEOR_FIELD_SEPARATOR in text:
                raise CaptionError(
                    caption_id,
                    f"caption {text!r} holds a line break or {METEOR_FIELD_SEPARATOR!r}, "
                    "which METEOR's protocol cannot carry",
                )
    meteor_gts = dict(zip(ids, references, strict=True))
    meteor_res = {caption_id: [text] for caption_id, text in zip(ids, candidates, strict=True)}
    if engine == "python":
        return np.asarray(meteor.Meteor().compute_score(meteor_gts, meteor_res)[1], np.float64)
    from pycocoevalcap.meteor.meteor import Meteor

    scorer = Meteor()
    try:
        _, scores = scorer.compute_score(meteor_gts, meteor_res)
    finally:
        del scorer  # pycocoevalcap's Meteor stops its Java process when collected.
    return np.asarray(scores, dtype=np.float64)


def start_meteor(gts: References, res: Candidates) -> Callable[[], list]:
    """METEOR's statistics, begun (Meteor.start): its threads run beside the metrics
    computed before the returned function is called."""
    return meteor.Meteor().start(gts, res)


def builtin_metric_rows(
    gts: References,
    res: Candidates,
    *,
    include_meteor: bool = True,
    cider_idf: CorpusIdf | None = None,
) -> list[bootstrap.MetricRows]:
    """Per-caption rows of the built-in metrics (BLEU-1..4, METEOR when included, ROUGE-L,
    CIDEr-D) on tokenised captions, as the drop-in computes them: n-grams counted once for
    BLEU and CIDEr-D, METEOR's compiled core running beside the others."""
    paired_captions(gts, res)  # bad input is refused, naming the caption, before any starts
    meteor_statistics = start_meteor(gts, res) if include_meteor else None
    try:
        ngrams = pair_ngrams(gts, res, DEFAULT_MAX_ORDER)
        rows = [bootstrap.bleu_rows(Bleu().statistics_of(ngrams))]
        rouge = bootstrap.mean_rows("ROUGE_L", Rouge().compute_score(gts, res)[1])
        cider = bootstrap.mean_rows("CIDEr", CiderD(idf=cider_idf).scores_of(ngrams))
    finally:
        if meteor_statistics is not None:
            rows.append(bootstrap.meteor_rows(meteor_statistics()))
    return [*rows, rouge, cider]


def per_caption(rows: Sequence[bootstrap.MetricRows]) -> dict[str, np.ndarray]:
    """Each metric's per-caption scores under its table name, in BUILTIN_METRICS' order."""
    by_key = {}
    for metric in rows:
        scores = metric.score(metric.rows, 1)
        by_key.update({key: scores[:, k] for k, key in enumerate(metric.keys)})
    return {m.name: by_key[m.coco_key] for m in BUILTIN_METRICS if m.coco_key in by_key}


def compute_caption_metrics(
    gts: References, res: Candidates, *, include_meteor: bool = True
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Per-caption BLEU-1..4, METEOR (when its data files are installed: capsim's METEOR,
    no Java), ROUGE-L and CIDEr on tokenised captions.

    Args:
        gts: id -> reference captions, tokenized (``capsim.metrics.tokenizer.ptb_tokenize``).
        res: id -> a one-element list with the candidate, tokenized.
        include_meteor: False skips METEOR (its first call in a process builds its tables).

    Returns:
        (metric -> per-caption scores in the order of ``res``, metric -> the reason it
        was skipped). SPICE is always among the skipped.
    """
    skipped = {"SPICE": spice_unavailable_reason()}
    meteor_reason = meteor_unavailable_reason()
    if not include_meteor:
        skipped["METEOR"] = "not requested (include_meteor=False)"
    elif meteor_reason is not None:
        skipped["METEOR"] = meteor_reason
    with_meteor = "METEOR" not in skipped
    return per_caption(builtin_metric_rows(gts, res, include_meteor=with_meteor)), skipped


def compute_ngram_metrics(gts: References, res: Candidates) -> dict[str, np.ndarray]:
    """Per-caption BLEU-1..4, ROUGE-L and CIDEr (CIDEr-D), in the order of ``res``."""
    return per_caption(builtin_metric_rows(gts, res, include_meteor=False))
