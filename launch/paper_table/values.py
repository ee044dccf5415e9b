"""A paper table's values: row -> seed -> column, read from its grid's job folders
(launch.aggregate.job_folders, the same reading results.csv is written from)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from launch.aggregate import SEED_PARAM, job_folders, lookup, number
from launch.paper_table.layout import ROW_PARAM, Path_, Table

GridValues = Mapping[str, Mapping[int, Mapping[str, float | None]]]  # row -> seed -> column


def _cells(results: Mapping, paths: Mapping[str, Path_]) -> dict[str, float | None]:
    return {column: number(lookup(results, path)) for column, path in paths.items()}


def grid_values(workdir: str | Path, table: Table) -> dict[str, dict[int, dict[str, float]]]:
    """row -> seed -> column -> value, from the finished jobs under ``workdir`` (a grid
    without a seed column is seed 0). Averages need every measure they average; a fixed
    row takes each seed's value from the first finished job of that seed."""
    values: dict[str, dict[int, dict[str, float]]] = {}
    for _, record, results in job_folders(workdir):
        params = record.get("params", {})
        if results is None or ROW_PARAM not in params:
            continue
        seed = int(params.get(SEED_PARAM, 0))
        values.setdefault(str(params[ROW_PARAM]), {})[seed] = _cells(results, table.measures)
        for fixed, paths in table.fixed_rows.items():
            values.setdefault(fixed, {}).setdefault(seed, _cells(results, paths))
    for seeds in values.values():
        for cells in seeds.values():
            for average, parts in table.averages.items():
                parts_here = [cells.get(part) for part in parts]
                if all(value is not None for value in parts_here):
                    cells[average] = float(np.mean(parts_here))
    return values


def side_values(values: GridValues, rows: Sequence[str], measure: str) -> dict[int, float]:
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
