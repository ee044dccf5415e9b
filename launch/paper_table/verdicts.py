"""A claim's verdict: a paired t-test over seeds.

The verdict of a claim "``higher`` beats ``lower`` on ``measure``" pairs, for each seed
that every named row finished, the mean of the higher rows with the mean of the lower
ones. The difference d's mean, the t-interval of that mean (launch.aggregate.t_interval,
at launch.aggregate.CONFIDENCE) and the two-sided p follow (``scipy.stats.ttest_rel``
gives the same). The claim **holds** when the interval lies above 0, is **reversed** when
it lies below, and is **not told apart** otherwise (p >= 0.05, one seed, or none). A row
without seeds (a fixed metric such as CIDEr, read from every job) pairs with each seed's
value, so the interval is the trained row's over seeds alone. A difference equal in every
seed has no spread to divide by: it is exact (p = 0 unless it is 0, p = 1), never a
division by zero. No correction for the number of claims is made; the report says so.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from launch.aggregate import CONFIDENCE, t_interval
from launch.paper_table.layout import Claim
from launch.paper_table.values import GridValues, side_values

HOLDS, REVERSED, NOT_TOLD_APART = "holds", "reversed", "not told apart"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A claim's outcome: the mean paired difference (higher - lower), its interval, p and
    the number of seeds paired."""

    verdict: str
    difference: float
    low: float
    high: float
    p: float
    seeds: int


def paired_verdict(
    higher: Sequence[float], lower: Sequence[float], confidence: float = CONFIDENCE
) -> Verdict:
    """The paired t-test of ``higher`` against ``lower`` (one value per seed, same order)."""
    from scipy import stats  # imported here: a config that defines a table stays light

    d = np.asarray(higher, np.float64) - np.asarray(lower, np.float64)
    n = d.size
    if n == 0:
        return Verdict(NOT_TOLD_APART, math.nan, math.nan, math.nan, math.nan, 0)
    mean = float(d.mean())
    if n == 1:
        return Verdict(NOT_TOLD_APART, mean, math.nan, math.nan, math.nan, 1)
    spread = float(d.std(ddof=1))
    if spread == 0.0:  # the same difference in every seed: exact, no spread to divide by
        low = high = mean
        p = 1.0 if mean == 0.0 else 0.0
    else:
        mean, low, high = t_interval(d, confidence)
        p = float(2 * stats.t.sf(abs(mean) / (spread / math.sqrt(n)), n - 1))
    if low > 0:
        verdict = HOLDS
    elif high < 0:
        verdict = REVERSED
    else:
        verdict = NOT_TOLD_APART
    return Verdict(verdict, mean, low, high, p, n)


def claim_verdict(values: GridValues, claim: Claim) -> Verdict:
    """The claim's verdict, its two sides paired on the seeds both have."""
    higher = side_values(values, claim.higher, claim.measure)
    lower = side_values(values, claim.lower, claim.measure)
    seeds = sorted(set(higher) & set(lower))
    return paired_verdict([higher[s] for s in seeds], [lower[s] for s in seeds])
