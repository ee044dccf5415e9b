"""Scoring a caption against a reference sentence by sentence (issue 60).

One sentence vector does not carry a paragraph: two 180-word captions that differ in a
few hallucinated objects get nearly the same vector. Aligned by sentences, a
hallucinated sentence finds no good match among the reference's sentences, and shows:

- **precision**: over the candidate's sentences, each one's best cosine among the
  reference's sentences, aggregated;
- **recall**: over the reference's sentences, each one's best cosine among the
  candidate's, aggregated;
- **F**: their weighted harmonic mean (``beta`` as in F-beta; where either is not
  positive, the smaller of the two, which is continuous with the harmonic mean at 0).

The aggregation over sentences is one of ``"mean"``, ``"min"`` or ``"softmin-T"``
(``-T log mean exp(-x / T)``: the mean at large T, the minimum as T goes to 0), each with
optional per-sentence weights (a sentence's length, for instance). All of it is NumPy on
the host, in float64, on similarities [..., M, S] with masks of the real sentences, so any
sentence encoder can use it; pooling over several references stays with
capsim.metrics.pooling.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

AGGREGATIONS = ("mean", "min", "softmin-T")
_SOFTMIN = re.compile(r"softmin-([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)")


def check_aggregation(mode: str) -> float | None:
    """The temperature of a ``"softmin-T"`` mode, None for ``"mean"``, 0.0 for ``"min"``.

    Raises:
      ValueError: for any other mode, listing the accepted ones.
    """
    if mode == "mean":
        return None
    if mode == "min":
        return 0.0
    match = _SOFTMIN.fullmatch(mode)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"unknown sentence aggregation {mode!r}: use one of {AGGREGATIONS}, T > 0")
    return float(match.group(1))


def aggregate(
    values: np.ndarray,
    mask: np.ndarray,
    mode: str = "mean",
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Aggregates ``values`` over their last axis, counting only the ``mask``-ed entries.

    Args:
      values: [..., K] per-sentence values (anything where ``mask`` is False is ignored).
      mask: [..., K] bool, the real sentences; every row must hold at least one.
      mode: ``"mean"``, ``"min"`` or ``"softmin-T"`` (see the module docstring).
      weights: [..., K] non-negative per-sentence weights (None: all 1).

    Returns:
      [...] float64 aggregates.

    Raises:
      ValueError: for an unknown mode or a row with no real entry.
    """
    temperature = check_aggregation(mode)
    values = np.asarray(values, np.float64)
    mask = np.broadcast_to(np.asarray(mask, bool), values.shape)
    if not mask.any(axis=-1).all():
        raise ValueError("a row has no sentence to aggregate")
    w = np.ones(values.shape) if weights is None else np.asarray(weights, np.float64)
    w = np.where(mask, np.broadcast_to(w, values.shape), 0.0)
    if (w.sum(axis=-1) <= 0).any():
        raise ValueError("a row's sentence weights sum to zero")
    if temperature is None:
        return (np.where(mask, values, 0.0) * w).sum(axis=-1) / w.sum(axis=-1)
    low = np.where(mask & (w > 0), values, np.inf).min(axis=-1)
    if temperature == 0.0:
        return low
    shifted = np.where(mask, values - low[..., None], 0.0)
    mean_exp = (w * np.exp(-shifted / temperature)).sum(axis=-1) / w.sum(axis=-1)
    return low - temperature * np.log(mean_exp)


def f_score(precision: np.ndarray, recall: np.ndarray, beta: float = 1.0) -> np.ndarray:
    """F-beta of precision and recall; where either is not positive, the smaller one.

    Args:
      precision: any shape.
      recall: the same shape.
      beta: recall counts ``beta`` times as much as precision (``0``: precision alone).

    Returns:
      The F scores, float64.
    """
    p, r = np.asarray(precision, np.float64), np.asarray(recall, np.float64)
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    positive = (p > 0) & (r > 0)
    b2 = beta * beta
    denominator = np.where(positive, b2 * p + r, 1.0)
    harmonic = (1 + b2) * p * r / denominator
    return np.where(positive, harmonic, np.minimum(p, r) if beta > 0 else p)


@dataclasses.dataclass
class Alignment:
    """Precision, recall and their F, each [...] (one per candidate-reference pair)."""

    precision: np.ndarray
    recall: np.ndarray
    score: np.ndarray


def align(
    sims: np.ndarray,
    candidate_mask: np.ndarray,
    reference_mask: np.ndarray,
    *,
    aggregation: str = "mean",
    candidate_weights: np.ndarray | None = None,
    reference_weights: np.ndarray | None = None,
    beta: float = 1.0,
) -> Alignment:
    """Sentence alignment of candidates and references from their sentences' cosines.

    Args:
      sims: [..., M, S] cosine of each candidate sentence with each reference sentence.
      candidate_mask: [..., M] bool, the candidate's real sentences (broadcast on ``...``).
      reference_mask: [..., S] bool, the reference's real sentences.
      aggregation: how best matches are aggregated over sentences (``aggregate``'s modes).
      candidate_weights: [..., M] weights of the candidate's sentences (None: equal).
      reference_weights: [..., S] weights of the reference's sentences (None: equal).
      beta: F-beta's beta (1: F1; 0: precision alone).

    Returns:
      The Alignment, each field [...].

    Raises:
      ValueError: when a candidate or reference has no real sentence, or a real
        similarity is not finite.
    """
    sims = np.asarray(sims, np.float64)
    cmask = np.broadcast_to(np.asarray(candidate_mask, bool), sims.shape[:-1])
    rmask = np.broadcast_to(np.asarray(reference_mask, bool), sims.shape[:-2] + sims.shape[-1:])
    real = cmask[..., :, None] & rmask[..., None, :]
    if not np.isfinite(np.where(real, sims, 0.0)).all():
        raise ValueError("a real sentence similarity is not finite")
    if not cmask.any(axis=-1).all() or not rmask.any(axis=-1).all():
        raise ValueError("a candidate or reference has no sentence to align")
    masked = np.where(real, sims, -np.inf)
    best_for_candidate = masked.max(axis=-1)  # [..., M]
    best_for_reference = masked.max(axis=-2)  # [..., S]
    precision = aggregate(best_for_candidate, cmask, aggregation, candidate_weights)
    recall = aggregate(best_for_reference, rmask, aggregation, reference_weights)
    return Alignment(precision, recall, f_score(precision, recall, beta))
