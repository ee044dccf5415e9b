"""Every resample the project draws, and the one way a count of them becomes a p-value.

Both the caption-metric bootstrap (``capsim.metrics.bootstrap``) and the meta-evaluation
(the image bootstrap and PERM-BOTH under ``capsim.eval``) draw here, from a caller's
``numpy.random.Generator``, so one seed gives one report:

- ``group_counts``: a bootstrap resample of groups (images), drawn with replacement,
  each group bringing all its rows; as how often each row is drawn.
- ``swap_masks``: for each resample, which units (images, pairs) swap between two
  systems or metrics (approximate randomization, PERM-BOTH).

P-values count the resamples at least as extreme as the observed difference, "at least"
allowing rounding (``TIE_TOLERANCE``: a swap of two equal outputs gives the observed
difference again, in other sums), and are (count + 1) / (resamples + 1) (Davison and
Hinkley 1997; Phipson and Smyth 2010): never 0, and 1 for a system against its own
copy. sacrebleu's paired tests count so. mt-metrics-eval's ``PermutationSigDiff``
returns count / resamples, so capsim's PERM-BOTH p-values lie above the reference's by
(1 - p) / (resamples + 1), at most 0.001 at its default 1,000 resamples.
"""

from __future__ import annotations

import numpy as np

TIE_TOLERANCE = 1e-12


def group_counts(
    rng: np.random.Generator,
    group_of_row: np.ndarray,
    resamples: int,
    stratum_of_group: np.ndarray | None = None,
) -> np.ndarray:
    """[resamples, rows]: how often each row is drawn when its group is resampled with
    replacement, each group bringing all its rows. With ``stratum_of_group``, groups are
    drawn within their stratum (PASCAL-50S: its categories), as many as it holds."""
    group_of_row = np.asarray(group_of_row, np.int64)
    groups = int(group_of_row.max()) + 1
    strata = np.zeros(groups, np.int64) if stratum_of_group is None else stratum_of_group
    counts = np.zeros((resamples, groups))
    offsets = (np.arange(resamples) * groups)[:, None]
    for stratum in np.unique(strata):
        members = np.flatnonzero(strata == stratum)
        drawn = members[rng.integers(0, members.size, size=(resamples, members.size))]
        counts += np.bincount((drawn + offsets).ravel(), minlength=resamples * groups).reshape(
            resamples, groups
        )
    return counts[:, group_of_row]


def swap_masks(rng: np.random.Generator, resamples: int, units: int) -> np.ndarray:
    """[resamples, units] booleans: the units whose two outputs swap, each with probability ½."""
    return rng.integers(0, 2, (resamples, units), dtype=bool)


def reaching(values: np.ndarray, observed: np.ndarray | float) -> np.ndarray:
    """Whether each value is at least ``observed``, up to rounding."""
    observed = np.asarray(observed, np.float64)
    return values >= observed - TIE_TOLERANCE * np.maximum(1.0, np.abs(observed))


def p_value(extreme: np.ndarray | int, resamples: np.ndarray | int) -> np.ndarray | float:
    """(resamples at least as extreme as observed + 1) / (resamples + 1)."""
    return (np.asarray(extreme) + 1) / (np.asarray(resamples) + 1)


def two_sided_p(differences: np.ndarray, delta: np.ndarray | float) -> np.ndarray:
    """Per column of [resamples, ...] ``differences``: the p-value of those at least as far
    from 0 as ``delta`` (resamples where the difference is undefined are left out)."""
    finite = np.isfinite(differences)
    far = reaching(np.abs(np.where(finite, differences, 0.0)), np.abs(delta)) & finite
    return p_value(far.sum(axis=0), finite.sum(axis=0))


def paired_bootstrap_p(differences: np.ndarray, delta: np.ndarray | float) -> np.ndarray:
    """The paired bootstrap's p-value (as sacrebleu's): the resampled differences, centred
    on their mean, against the observed ``delta``; per column, undefined ones left out."""
    finite = np.isfinite(differences)
    count = np.maximum(finite.sum(axis=0), 1)
    mean = np.where(finite, differences, 0.0).sum(axis=0) / count
    return two_sided_p(differences - mean, delta)
