"""A paper table's output: each cell our mean over seeds with its interval, and under it
every claim of the table with its verdict, as ``table.md`` and ``table.json`` beside the
grid's ``results.md``. Claims whose rows are not all in the grid (a sub-grid) are listed
as not evaluated, naming the rows.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
from collections.abc import Mapping, Sequence
from pathlib import Path

from capsim.config_lib import SCALE_ARG
from capsim.tables import format_table
from launch.aggregate import CONFIDENCE, t_interval
from launch.grid import expand_grid
from launch.paper_table.layout import ROW_PARAM, Table
from launch.paper_table.values import grid_values
from launch.paper_table.verdicts import claim_verdict

TABLE_MARKDOWN, TABLE_JSON = "table.md", "table.json"


def _cell(values: Sequence[float]) -> dict[str, float | int]:
    if len(values) >= 2:
        mean, low, high = t_interval(values, CONFIDENCE)
        return {"mean": mean, "low": low, "high": high, "seeds": len(values)}
    return {"mean": values[0], "seeds": 1} if values else {"seeds": 0}


def table_report(workdir: str | Path, module: types.ModuleType, arg: str = "") -> dict:
    """The table and its verdicts as one JSON-able dict; the scale is the one the table
    config's own parser (``parse_table_arg``, launch.paper_table.grid_config) reads."""
    table: Table = module.TABLE
    grid_rows = {job.params.get(ROW_PARAM) for job in expand_grid(module, arg)}
    grid_rows = {str(row) for row in grid_rows if row is not None} | set(table.fixed_rows)
    values = grid_values(workdir, table)
    rows = []
    for row in (r for r in table.all_rows if r in grid_rows):
        seeds = values.get(row, {})
        cells = {}
        for column in table.columns:
            cell = _cell([c[column] for c in seeds.values() if c.get(column) is not None])
            if (row, column) in table.paper:
                cell["paper"] = table.paper[(row, column)]
            cells[column] = cell
        rows.append(
            {
                "row": row,
                "label": table.label(row),
                "fixed": row in table.fixed_rows,
                "cells": cells,
            }
        )
    claims = []
    for claim in table.claims:
        absent = [r for r in (*claim.higher, *claim.lower) if r not in grid_rows]
        entry = dataclasses.asdict(claim)
        if absent:
            entry["not_evaluated"] = f"rows not in this grid: {', '.join(absent)}"
        else:
            entry.update(dataclasses.asdict(claim_verdict(values, claim)))
        claims.append(entry)
    scale = module.parse_table_arg(arg or None)[SCALE_ARG]
    return {
        "title": table.title,
        "config_arg": arg,
        "scale": scale,
        "scale_note": table.scales.get(scale, ""),
        "seeds": sorted({s for row in values.values() for s in row}),
        "columns": list(table.columns),
        "rows": rows,
        "claims": claims,
        "confidence": CONFIDENCE,
    }


def _number(value: float, signed: bool = False) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def _format_cell(cell: Mapping[str, float], fixed: bool) -> str:
    if "mean" not in cell:
        text = "n/a"
    elif "low" in cell:
        text = f"{cell['mean']:.2f} [{cell['low']:.2f}, {cell['high']:.2f}]"
    else:
        text = f"{cell['mean']:.2f}" + ("" if fixed else " (1 seed)")
    return text + (f" (paper: {cell['paper']:.2f})" if "paper" in cell else "")


def _p(value: float) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return "< 0.001" if value < 1e-3 else f"{value:.3f}"


def render_markdown(report: Mapping) -> str:
    """The report as markdown: the table, then the claims with their verdicts."""
    seeds = report["seeds"]
    lines = [
        f"# {report['title']}",
        "",
        f"Scale `{report['scale']}`: {report['scale_note']}",
        "",
        f"Seeds: {len(seeds)} ({', '.join(map(str, seeds))}). Each cell: the mean over seeds "
        f"[{report['confidence']:.0%} t-interval of that mean]. A row marked (no seed) is a "
        "fixed metric, read from the jobs. The paper's own figure is given beside a cell "
        "only where the paper's text states one (its tables were lost in extraction).",
        "",
    ]
    columns = ["row", *report["columns"]]
    rows = [
        {
            "row": entry["label"] + (" (no seed)" if entry["fixed"] else ""),
            **{c: _format_cell(entry["cells"][c], entry["fixed"]) for c in report["columns"]},
        }
        for entry in report["rows"]
    ]
    lines += [format_table(rows, columns), "", "## Claims", ""]
    interval_column = f"{report['confidence']:.0%} interval"
    claim_columns = [
        "claim",
        "source",
        "measure",
        "higher - lower",
        interval_column,
        "p",
        "seeds",
        "verdict",
    ]
    claim_rows = []
    for claim in report["claims"]:
        row = {"claim": claim["text"], "source": claim["source"], "measure": claim["measure"]}
        if "not_evaluated" in claim:
            row.update({c: "" for c in claim_columns[3:-1]}, verdict=claim["not_evaluated"])
        else:
            interval = f"[{_number(claim['low'], True)}, {_number(claim['high'], True)}]"
            row.update(
                {
                    "higher - lower": _number(claim["difference"], True),
                    interval_column: interval,
                    "p": _p(claim["p"]),
                    "seeds": claim["seeds"],
                    "verdict": f"**{claim['verdict']}**",
                }
            )
        claim_rows.append(row)
    lines += [
        format_table(claim_rows, claim_columns),
        "",
        "Each claim: a paired t-test over the seeds both sides finished (a side of several "
        "rows is their mean in each seed). **holds**: the interval of the mean difference "
        "lies above 0; **reversed**: below 0; **not told apart**: it holds 0 (or fewer "
        "than 2 seeds). A fixed metric has no seed, so its comparisons use the trained "
        "row's spread over seeds alone. No correction is made for the number of claims.",
    ]
    return "\n".join(lines) + "\n"


def write_table(workdir: str | Path, module: types.ModuleType, arg: str = "") -> dict:
    """Writes table.md and table.json under ``workdir``; returns the report."""
    report = table_report(workdir, module, arg)
    workdir = Path(workdir)
    (workdir / TABLE_JSON).write_text(json.dumps(report, indent=2) + "\n")
    (workdir / TABLE_MARKDOWN).write_text(render_markdown(report))
    return report
