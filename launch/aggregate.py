"""A grid's job folders as numbers: reading them, the seed, the interval over seeds, and
the grid's own table (results.csv, results.md).

What every reader of a grid's results shares is defined here once: the job folders with
their results (``job_folders``), a value at a path of results.json (``lookup``), the
seed's column (``SEED_PARAM``), the confidence level and the t-interval of a mean
(``t_interval``). The paper tables (launch.paper_table) read the same folders with them.

One row per job folder (its swept values, status, metrics and log). When the grid
repeats configurations over seeds (a ``seed`` column, e.g. the sweep configs'
``seeds=K``), each configuration with two or more finished seeds also gets its mean
over them with a 95% interval: mean ± t(0.975, n-1) · s / sqrt(n), s the standard
deviation over seeds (n - 1 in its denominator). The interval is the range for the
configuration's expected value over seeds (a confidence interval for the mean), not
where the mean of n other seeds would fall (a prediction interval, about √2 wider);
two configurations whose intervals overlap much are not told apart by this many seeds.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from capsim.tables import format_table
from capsim.workdir import RESULTS_FILE
from launch.grid import JOB_FILE, LOG_FILE

STS_AVERAGE = "avg2016"
STS_YEAR_METRIC = "spearman_mean"
SEED_PARAM = "seed"  # the seed's column: the label of config.seed (launch.grid.param_label)
CONFIDENCE = 0.95


def job_folders(workdir: str | Path) -> list[tuple[Path, dict, Mapping | None]]:
    """Each job folder under ``workdir`` in name order: (folder, its job.json, its
    results.json or None while it has none)."""
    folders = []
    for job_file in sorted(Path(workdir).glob(f"*/{JOB_FILE}")):
        results_file = job_file.parent / RESULTS_FILE
        results = json.loads(results_file.read_text()) if results_file.exists() else None
        folders.append((job_file.parent, json.loads(job_file.read_text()), results))
    return folders


def lookup(results: Mapping, path: Sequence[str]) -> object | None:
    """The value at ``path`` (keys) in a job's results, or None where it has none."""
    for part in path:
        if not isinstance(results, Mapping) or results.get(part) is None:
            return None
        results = results[part]
    return results


def number(value: object) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else None."""
    plain = isinstance(value, int | float | np.number) and not isinstance(value, bool)
    return float(value) if plain and math.isfinite(value) else None


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, ...]:
    """(mean, low, high): the t-interval of the mean of ``values`` (two or more), the range
    for the expected value over seeds: mean ± t((1 + confidence) / 2, n - 1) · s / sqrt(n)."""
    from scipy import stats  # imported here: a config that defines a table stays light

    values = np.asarray(values, np.float64)
    mean = float(values.mean())
    half = stats.t.ppf((1 + confidence) / 2, values.size - 1) * values.std(ddof=1)
    half /= np.sqrt(values.size)
    return mean, mean - float(half), mean + float(half)


def _metrics(results: Mapping, metrics: Mapping[str, Sequence[str]]) -> dict[str, object]:
    """The table's metrics of one results.json (a missing one ""); STS adds per-year
    Spearman and avg2016."""
    row = {column: _cell(lookup(results, path)) for column, path in metrics.items()}
    sts = results.get("sts") or {}
    for year, scores in sts.items():
        if isinstance(scores, Mapping):
            row[f"{year}_spearman"] = scores[STS_YEAR_METRIC]
    if STS_AVERAGE in sts:
        row[STS_AVERAGE] = sts[STS_AVERAGE]
    return row


def _cell(value: object) -> object:
    return "" if value is None else value


def _status(record: Mapping, results: Mapping | None) -> str:
    if results is not None:
        return "ok"
    return "failed" if "returncode" in record else "unfinished"


def _union(keys: Iterable[Iterable[str]]) -> list[str]:
    return list(dict.fromkeys(key for group in keys for key in group))


def aggregate(workdir: str | Path, metrics: Mapping[str, Sequence[str]]) -> list[dict[str, object]]:
    """One row per job folder under ``workdir``: swept values, status, ``metrics``
    (column -> path into results.json), log path.

    Writes ``results.csv`` (every column; with seeds, the means over seeds as rows of
    status "mean" with their interval columns) and ``results.md`` (the table, the means
    over seeds, then the failed jobs with their logs); missing metrics are empty.
    """
    workdir = Path(workdir)
    jobs = []
    for job_dir, record, results in job_folders(workdir):
        row = _metrics(results, metrics) if results is not None else {}
        jobs.append((record, _status(record, results), row, job_dir / LOG_FILE))
    param_columns = _union(record["params"] for record, *_ in jobs)
    metric_columns = _union([metrics, *(row for _, _, row, _ in jobs)])
    columns = ["job", *param_columns, "status", *metric_columns, "log"]
    rows = [
        {
            "job": record["name"],
            **{column: record["params"].get(column, "") for column in param_columns},
            "status": status,
            **{column: row.get(column, "") for column in metric_columns},
            "log": str(log),
        }
        for record, status, row, log in jobs
    ]
    means = seed_means(rows, param_columns, metric_columns) if SEED_PARAM in param_columns else []
    interval_columns = [f"{c}_ci_{side}" for c in metric_columns for side in ("low", "high")]
    csv_columns = [*columns, *(interval_columns if means else [])]
    with open(workdir / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=csv_columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
        writer.writerows({"job": "", "status": "mean", **summary} for summary in means)
    table_columns = [c for c in columns if c not in ("job", "log")]
    lines = [f"# Sweep results: {workdir}", "", format_table(rows, table_columns)]
    if means:
        configuration = [c for c in param_columns if c != SEED_PARAM]
        mean_rows = [
            {
                **{c: summary[c] for c in [*configuration, SEED_PARAM]},
                **{c: _interval_cell(summary, c) for c in metric_columns},
            }
            for summary in means
        ]
        lines += [
            "",
            f"## Means over seeds, with {CONFIDENCE:.0%} intervals",
            "",
            format_table(mean_rows, [*configuration, SEED_PARAM, *metric_columns]),
        ]
    failed = [row for row in rows if row["status"] == "failed"]
    if failed:
        lines += ["", "## Failed jobs", ""]
        lines += [f"- `{row['job']}`: `{row['log']}`" for row in failed]
    (workdir / "results.md").write_text("\n".join(lines) + "\n")
    return rows


def seed_means(
    rows: Sequence[Mapping[str, object]],
    param_columns: Sequence[str],
    metric_columns: Sequence[str],
) -> list[dict[str, object]]:
    """Per configuration (the swept values but the seed) with two or more finished seeds:
    each metric's mean over them with its interval (``<metric>_ci_low``, ``_ci_high``)."""
    configuration = [c for c in param_columns if c != SEED_PARAM]
    groups: dict[tuple, list[Mapping[str, object]]] = {}
    for row in rows:
        if row["status"] == "ok":
            groups.setdefault(tuple(row[c] for c in configuration), []).append(row)
    summaries = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        summary: dict[str, object] = dict(zip(configuration, key, strict=True))
        summary[SEED_PARAM] = f"mean of {len(members)}"
        for column in metric_columns:
            values = [row[column] for row in members if number(row[column]) is not None]
            if len(values) >= 2:
                mean, low, high = t_interval(values)
                summary.update({column: mean, f"{column}_ci_low": low, f"{column}_ci_high": high})
        summaries.append(summary)
    return summaries


def _interval_cell(summary: Mapping[str, object], column: str) -> str:
    if f"{column}_ci_low" not in summary:
        return ""
    low, high = summary[f"{column}_ci_low"], summary[f"{column}_ci_high"]
    return f"{summary[column]:.2f} [{low:.2f}, {high:.2f}]"
