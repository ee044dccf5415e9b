"""A paper's table as a seeded grid: its rows, its measures, the claims it makes, and a
verdict for each claim from configurations paired by seed.

A table config (``configs/tables/*.py``) is a grid config (launch.grid) that also
defines ``TABLE``, a :class:`Table`: the grid sweeps one row parameter (``row``) and the
seeds, and the table says which path of a job's results.json each measure reads. The
claims are written once, there, as orderings (:class:`Claim`); ``launch.report`` reads
them and never states one itself.

The verdict of a claim "``higher`` beats ``lower`` on ``measure``" is a paired t-test
over seeds: for each seed that every named row finished, the difference d between the
mean of the higher rows and the mean of the lower ones. Its mean, the 95% t-interval of
that mean and the two-sided p follow (``scipy.stats.ttest_rel`` gives the same). The
claim **holds** when the interval lies above 0, is **reversed** when it lies below, and
is **not told apart** otherwise (p >= 0.05, one seed, or none). A row without seeds (a
fixed metric such as CIDEr, read from every job) pairs with each seed's value, so the
interval is the trained row's over seeds alone. A difference equal in every seed has no
spread to divide by: it is exact (p = 0 unless it is 0, p = 1), never a division by zero.
No correction for the number of claims is made; the report says so.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from capsim.workdir import RESULTS_FILE
from launch.grid import JOB_FILE

CONFIDENCE = 0.95
HOLDS, REVERSED, NOT_TOLD_APART = "holds", "reversed", "not told apart"
SEED_PARAM = "seed"
Path_ = tuple[str, ...]  # keys into a job's results.json


@dataclasses.dataclass(frozen=True)
class Claim:
    """ "``higher`` beats ``lower`` on ``measure``", as the paper states it (``text``,
    ``source``: where). Each side names one row or several, averaged per seed."""

    text: str
    higher: tuple[str, ...]
    lower: tuple[str, ...]
    measure: str
    source: str = ""

    def __post_init__(self) -> None:  # a lone row name is a side of one
        for side in ("higher", "lower"):
            value = getattr(self, side)
            object.__setattr__(self, side, (value,) if isinstance(value, str) else tuple(value))


@dataclasses.dataclass(frozen=True)
class Table:
    """A paper table's layout: trained ``rows`` (values of the grid's ``row_param``, in the
    paper's order, with display ``labels``), ``measures`` (column -> path into
    results.json), ``averages`` (column -> the measures it averages), ``fixed_rows``
    (a metric with no seed: row -> column -> path, read from every job), the paper's
    own figures where its text gives one (``paper``: (row, column) -> value), and the
    ``claims``. ``scales`` says what each ``scale`` argument trains and how that
    differs from the paper."""

    title: str
    rows: tuple[str, ...]
    measures: Mapping[str, Path_]
    claims: tuple[Claim, ...]
    scales: Mapping[str, str]
    row_param: str = "row"
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    averages: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    fixed_rows: Mapping[str, Mapping[str, Path_]] = dataclasses.field(default_factory=dict)
    paper: Mapping[tuple[str, str], float] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        columns = set(self.measures)
        for average, parts in self.averages.items():
            _refuse(set(parts) - columns, f"average {average!r} names the measure(s)")
        for row, paths in self.fixed_rows.items():
            _refuse(set(paths) - columns, f"fixed row {row!r} names the measure(s)")
        for claim in self.claims:
            self.check_claim(claim, self.all_rows)
        for row, column in self.paper:
            _refuse(
                [] if row in self.all_rows else [row], f"paper figure at {column!r} names the row"
            )
            _refuse(
                [] if column in self.columns else [column],
                f"paper figure of {row!r} names the measure",
            )

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.measures, *self.averages)

    @property
    def all_rows(self) -> tuple[str, ...]:
        return (*self.rows, *self.fixed_rows)

    def check_claim(self, claim: Claim, rows: Sequence[str]) -> None:
        """Refuses a claim that names a row or a measure absent from ``rows`` or the table."""
        _refuse(
            [r for r in (*claim.higher, *claim.lower) if r not in rows],
            f"claim {claim.text!r} names the row(s), absent from the grid",
        )
        _refuse(
            [] if claim.measure in self.columns else [claim.measure],
            f"claim {claim.text!r} names the measure, absent from the table",
        )

    def label(self, row: str) -> str:
        return self.labels.get(row, row)


def _refuse(names: Sequence[str] | set[str], what: str) -> None:
    if names:
        raise KeyError(f"{what} {sorted(names)}")


# --------------------------------------------------------------------------- statistics


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
        error = spread / math.sqrt(n)
        half = float(stats.t.ppf((1 + confidence) / 2, n - 1)) * error
        low, high = mean - half, mean + half
        p = float(2 * stats.t.sf(abs(mean) / error, n - 1))
    if low > 0:
        verdict = HOLDS
    elif high < 0:
        verdict = REVERSED
    else:
        verdict = NOT_TOLD_APART
    return Verdict(verdict, mean, low, high, p, n)


# --------------------------------------------------------------------------- a grid's values


def _lookup(results: Mapping, path: Path_) -> float | None:
    for key in path:
        if not isinstance(results, Mapping) or key not in results:
            return None
        results = results[key]
    number = isinstance(results, int | float) and not isinstance(results, bool)
    return float(results) if number and math.isfinite(results) else None


def grid_values(workdir: str | Path, table: Table) -> dict[str, dict[int, dict[str, float]]]:
    """row -> seed -> column -> value, from the finished jobs under ``workdir`` (a grid
    without a seed column is seed 0). Averages need every measure they average; a fixed
    row takes each seed's value from the first finished job of that seed."""
    values: dict[str, dict[int, dict[str, float]]] = {}
    for job_file in sorted(Path(workdir).glob(f"*/{JOB_FILE}")):
        results_file = job_file.parent / RESULTS_FILE
        params = json.loads(job_file.read_text()).get("params", {})
        if not results_file.exists() or table.row_param not in params:
            continue
        results = json.loads(results_file.read_text())
        seed = int(params.get(SEED_PARAM, 0))
        row = str(params[table.row_param])
        cells = {c: _lookup(results, path) for c, path in table.measures.items()}
        values.setdefault(row, {})[seed] = cells
        for fixed, paths in table.fixed_rows.items():
            fixed_seeds = values.setdefault(fixed, {})
            if seed not in fixed_seeds:
                fixed_seeds[seed] = {c: _lookup(results, path) for c, path in paths.items()}
    for seeds in values.values():
        for cells in seeds.values():
            for average, parts in table.averages.items():
                parts_here = [cells.get(part) for part in parts]
                if all(value is not None for value in parts_here):
                    cells[average] = float(np.mean(parts_here))
    return values


def side_values(
    values: Mapping[str, Mapping[int, Mapping[str, float]]], rows: Sequence[str], measure: str
) -> dict[int, float]:
    """seed -> the mean of ``rows`` on ``measure``, for the seeds where every row has it."""
    per_row = [
        {
            s: cells[measure]
            for s, cells in values.get(row, {}).items()
            if cells.get(measure) is not None
        }
        for row in rows
    ]
    seeds = sorted(set.intersection(*(set(r) for r in per_row))) if per_row else []
    return {s: float(np.mean([r[s] for r in per_row])) for s in seeds}


def claim_verdict(values: Mapping[str, Mapping[int, Mapping[str, float]]], claim: Claim) -> Verdict:
    """The claim's verdict, its two sides paired on the seeds both have."""
    higher = side_values(values, claim.higher, claim.measure)
    lower = side_values(values, claim.lower, claim.measure)
    seeds = sorted(set(higher) & set(lower))
    return paired_verdict([higher[s] for s in seeds], [lower[s] for s in seeds])
