"""A paper table's grid, as its config file builds it: one job per chosen row and seed.

A table config (``configs/tables/*.py``) writes

    get_config, get_sweep, parse_table_arg = table_grid(_parse, _row, ROWS)

from its argument parser (``capsim.config_lib.parse_scaled_arg`` with the table's
scales) and its row builder. ``parse_table_arg`` is that parser, kept so the table's
report asks it the scale rather than reading the argument again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import ml_collections

from capsim.config_lib import differing_blocks, plus_joined, seed_sweep
from launch.paper_table.layout import ROW_PARAM

Parse = Callable[[str | None], ml_collections.ConfigDict]


def row_sweep(hyper, rows: Mapping[str, ml_collections.ConfigDict], seeds: int) -> list[dict]:
    """A paper table's grid: one job per row (each its own config, given to the grid as
    what differs from the first row's) and seed (``seed_sweep``)."""
    first = next(iter(rows.values()))
    return hyper.product(
        [
            hyper.sweep(ROW_PARAM, {name: differing_blocks(first, c) for name, c in rows.items()}),
            *seed_sweep(hyper, seeds),
        ]
    )


def table_grid(
    parse: Parse,
    build_row: Callable[[ml_collections.ConfigDict, str], ml_collections.ConfigDict],
    rows: Sequence[str],
) -> tuple[Callable, Callable, Parse]:
    """A paper table's ``get_config`` (its first chosen row), ``get_sweep`` (every chosen
    row, ``row_sweep`` over the ``seeds`` argument) and its argument parser, from that
    parser and its row builder ``build_row(arg, row)``."""

    def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
        parsed = parse(arg)
        return build_row(parsed, chosen_rows(parsed, rows)[0])

    def get_sweep(hyper, arg: str | None = None) -> list[dict]:
        parsed = parse(arg)
        built = {row: build_row(parsed, row) for row in chosen_rows(parsed, rows)}
        return row_sweep(hyper, built, parsed.seeds)

    return get_config, get_sweep, parse


def chosen_rows(arg: ml_collections.ConfigDict, known: Sequence[str]) -> tuple[str, ...]:
    """The ``rows`` argument (``+``-joined, in the table's order; "" for all of them)."""
    names = plus_joined(arg.rows) or tuple(known)
    unknown = [name for name in names if name not in known]
    if unknown:
        raise KeyError(f"unknown rows {unknown}; known: {list(known)}")
    return tuple(name for name in known if name in names)
