"""Pooling a candidate's similarities to its references into one score.

Reference lists differ in length, so similarities arrive padded as [N, R]
with a boolean mask of the real entries. I2CE's default is the mean of the top
3 similarities ("max-3"); "max" and "mean" are the two extremes. Pooling runs
on the host in float64 after the encoder: a few numbers per candidate.
"""

from __future__ import annotations

import re

import numpy as np

DEFAULT_POOLING = "top-3"
MEAN_MODE = "mean"
MAX_MODE = "max"
_TOP_K_MODE = re.compile(r"(?:max|top)-([1-9][0-9]*)")


def top_k_of_mode(mode: str) -> int | None:
    """k of a "max-k"/"top-k" mode (1 for "max"), or None for "mean".

    Raises ValueError for any other mode, listing the accepted ones.
    """
    if mode == MEAN_MODE:
        return None
    if mode == MAX_MODE:
        return 1
    match = _TOP_K_MODE.fullmatch(mode)
    if match is None:
        raise ValueError(
            f"unknown pooling mode {mode!r}: use {MEAN_MODE!r}, {MAX_MODE!r}, 'max-k' or 'top-k'"
        )
    return int(match.group(1))


def _check_shapes(sims_shape: tuple[int, ...], mask_shape: tuple[int, ...] | None) -> None:
    if len(sims_shape) != 2:
        raise ValueError(f"sims must be [candidates, references], got shape {sims_shape}")
    if mask_shape is not None and mask_shape != sims_shape:
        raise ValueError(f"mask shape {mask_shape} differs from sims shape {sims_shape}")


def _pool(sims: np.ndarray, real: np.ndarray, top_k: int | None) -> np.ndarray:
    """Mean of the top_k real entries per row (k capped at the row's real count), or of all."""
    real_counts = real.sum(axis=-1)
    if top_k is None:
        return np.where(real, sims, 0).sum(axis=-1) / real_counts
    # Sorting the negated values puts each row's largest real entries first and padding last.
    ranked = -np.sort(np.where(real, -sims, np.inf), axis=-1)
    kept = np.minimum(real_counts, top_k)
    keep = np.arange(sims.shape[-1])[None, :] < kept[:, None]
    return np.where(keep, ranked, 0).sum(axis=-1) / kept


def pool_similarities(
    sims: np.ndarray, mask: np.ndarray | None = None, mode: str = DEFAULT_POOLING
) -> np.ndarray:
    """Pools [N, R] candidate-reference similarities into [N] scores (NumPy).

    ``mask`` marks real references (None: all are real). Modes: "max-k" or
    "top-k" (mean of the k largest real similarities, k capped at the number of
    real references), "max" and "mean". Raises ValueError naming the row for a
    non-finite real similarity or a row without real references.
    """
    top_k = top_k_of_mode(mode)
    sims = np.asarray(sims, dtype=np.float64)
    mask = None if mask is None else np.asarray(mask, dtype=bool)
    _check_shapes(sims.shape, None if mask is None else mask.shape)
    real = np.ones(sims.shape, dtype=bool) if mask is None else mask
    empty_rows = np.flatnonzero(~real.any(axis=-1))
    if empty_rows.size:
        raise ValueError(f"row {empty_rows[0]} of sims has no real reference to pool")
    bad_rows = np.flatnonzero((real & ~np.isfinite(sims)).any(axis=-1))
    if bad_rows.size:
        raise ValueError(f"row {bad_rows[0]} of sims has a non-finite similarity")
    return _pool(sims, real, top_k)
