"""Markdown tables, the form every job and bench prints its figures in, and a run's
headline numbers as rows for them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

TABLE_FLOAT_FORMAT = "{:.2f}"


def _table_cell(value: object) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float | np.floating):
        return TABLE_FLOAT_FORMAT.format(value)
    return str(value).replace("|", "\\|")


def format_table(rows: Sequence[Mapping[str, object]], columns: Sequence[str]) -> str:
    """A markdown table of ``rows`` restricted to ``columns``; floats get 2 decimals."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for index, row in enumerate(rows):
        missing = [column for column in columns if column not in row]
        if missing:
            raise ValueError(f"table row {index} has no value for column(s) {missing}")
        lines.append("| " + " | ".join(_table_cell(row[column]) for column in columns) + " |")
    return "\n".join(lines)


def format_cells(columns: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """``format_table`` of rows given as cells in ``columns``' order: how a bench writes a
    row it has formatted itself (its own units and precision per column)."""
    return format_table([dict(zip(columns, row, strict=True)) for row in rows], columns)


def results_rows(results: Mapping[str, object]) -> list[dict[str, object]]:
    """A run's headline numbers as (task, measure, value) rows, for the table a job prints.

    Numbers one level down are kept (``{"same_diff": {"auc": 88.4}}``); for STS
    each year's mean Pearson and Spearman over its subsets, not every subset.
    """
    rows: list[dict[str, object]] = []
    for task, value in results.items():
        if not isinstance(value, Mapping):
            continue
        for measure, number in value.items():
            if isinstance(number, Mapping) and "spearman_mean" in number:
                rows.append(
                    {
                        "task": f"{task} {measure}",
                        "measure": "pearson / spearman mean",
                        "value": f"{number['pearson_mean']:.2f} / {number['spearman_mean']:.2f}",
                    }
                )
            elif isinstance(number, float | int) and not isinstance(number, bool):
                rows.append({"task": task, "measure": measure, "value": number})
    return rows
