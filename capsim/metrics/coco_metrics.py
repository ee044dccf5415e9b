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

import importlib.util
import shutil
from typing import Literal

import numpy as np

from capsim.errors import CaptionError
from capsim.metrics import meteor
from capsim.metrics.bleu import Bleu
from capsim.metrics.cider import CiderD
from capsim.metrics.ngram_counts import (
    DEFAULT_MAX_ORDER,
    Candidates,
    References,
    paired_captions,
)
from capsim.metrics.rouge import Rouge

JAVA_EXECUTABLE = "java"
PYCOCOEVALCAP_MODULE = "pycocoevalcap"
# METEOR's stdin protocol separates fields with " ||| " and records with newlines.
METEOR_FIELD_SEPARATOR = "|||"


MeteorEngine = Literal["python", "jar"]


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


def compute_caption_metrics(
    gts: References, res: Candidates, *, include_meteor: bool = True
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Per-caption BLEU-1..4, ROUGE-L, CIDEr and, when its data files are installed,
    METEOR (capsim's Python METEOR: no Java).

    Returns (metric -> per-caption scores in the order of ``res``, metric ->
    reason it was skipped). SPICE is always among the skipped.
    """
    scores = compute_ngram_metrics(gts, res)
    skipped = {"SPICE": spice_unavailable_reason()}
    meteor_reason = meteor_unavailable_reason()
    if not include_meteor:
        skipped["METEOR"] = "not requested (include_meteor=False)"
    elif meteor_reason is not None:
        skipped["METEOR"] = meteor_reason
    else:
        scores["METEOR"] = compute_meteor(gts, res)
    return scores, skipped


def compute_ngram_metrics(gts: References, res: Candidates) -> dict[str, np.ndarray]:
    """Per-caption BLEU-1..4, ROUGE-L and CIDEr (CIDEr-D), in the order of ``res``."""
    _, bleu = Bleu(DEFAULT_MAX_ORDER).compute_score(gts, res)
    metrics = {f"BLEU-{order + 1}": np.asarray(s) for order, s in enumerate(bleu)}
    metrics["ROUGE-L"] = Rouge().compute_score(gts, res)[1]
    metrics["CIDEr"] = CiderD().compute_score(gts, res)[1]
    return metrics
