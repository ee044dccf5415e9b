"""A metric developer's own metric on the judgment sets, without editing this code.

Either a scorer (``MODULE:ATTR``: an object with pycocoevalcap's
``compute_score(gts, res)`` on raw captions, or a class or zero-argument function that
returns one), or scores computed elsewhere, keyed by the set's row ids. Both are
checked: one finite number per row, and errors name the metric, the set and the row.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np

# A scorer follows pycocoevalcap's contract: compute_score(gts, res) -> (corpus, per-caption).
ComputeScore = Callable[[Mapping[str, list[str]], Mapping[str, list[str]]], tuple]


def plugged_metric(name: str, spec: str) -> ComputeScore:
    """The ``compute_score`` of ``MODULE:ATTR``: an object that has it, or a class or
    zero-argument function that returns one. Errors name the metric."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"metric {name!r}: expected MODULE:ATTR, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(
            f"metric {name!r}: module {module_name!r} does not import ({error})"
        ) from error
    if not hasattr(module, attribute):
        raise ValueError(f"metric {name!r}: module {module_name!r} has no {attribute!r}")
    target = getattr(module, attribute)
    if isinstance(target, type) or (callable(target) and not hasattr(target, "compute_score")):
        target = target()
    if not callable(getattr(target, "compute_score", None)):
        raise ValueError(
            f"metric {name!r}: {spec} is not an object with compute_score(gts, res), "
            "nor a class or function that returns one"
        )
    return target.compute_score


def checked_scores(metric: str, set_name: str, ids: Sequence[str], values) -> np.ndarray:
    """A metric's per-row scores as floats, refused (naming the row) when they are not
    one finite number per row."""
    try:
        scores = np.asarray(values, np.float64).reshape(-1)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"metric {metric!r} on {set_name}: scores are not numbers ({error})"
        ) from error
    if scores.size != len(ids):
        raise ValueError(
            f"metric {metric!r} on {set_name}: {scores.size} scores for {len(ids)} rows"
        )
    bad = np.flatnonzero(~np.isfinite(scores))
    if bad.size:
        raise ValueError(
            f"metric {metric!r} on {set_name}: row {ids[bad[0]]!r} scored {scores[bad[0]]} "
            f"({bad.size} rows not finite)"
        )
    return scores


def given_scores(
    metric: str, set_name: str, ids: Sequence[str], scores: Mapping[str, object]
) -> np.ndarray:
    """Scores a user computed beforehand, ``row id -> score``, lined up with the set's rows."""
    missing = [row for row in ids if row not in scores]
    if missing:
        raise ValueError(
            f"metric {metric!r} on {set_name}: no score for row {missing[0]!r} "
            f"({len(missing)} of {len(ids)} rows missing)"
        )
    values = []
    for row in ids:
        value = scores[row]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(
                f"metric {metric!r} on {set_name}: row {row!r} scored {value!r}, not a number"
            )
        values.append(float(value))
    return checked_scores(metric, set_name, ids, values)
