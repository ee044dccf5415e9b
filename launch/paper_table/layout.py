"""A paper table's layout: its rows, its measures (paths into a job's results.json), the
paper's own figures, and the claims it makes as orderings of rows (:class:`Claim`).

A table config (``configs/tables/*.py``) defines ``TABLE``, a :class:`Table`, beside its
grid (launch.paper_table.grid_config). The claims are written once, there;
launch.paper_table.verdicts judges them and never states one itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

ROW_PARAM = "row"  # the grid's row column: a job's params[ROW_PARAM] names its row
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
    """A paper table's layout: trained ``rows`` (values of the grid's ``ROW_PARAM``, in the
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
