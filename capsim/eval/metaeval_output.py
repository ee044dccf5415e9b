"""What ``python -m capsim.metaeval`` shows and writes of each set's figures.

A table per set (each metric's statistics, × 100, with intervals where the bootstrap ran
and the rank of its significance cluster), the comparisons with the baseline and their
reading, the JSON report (NaN as null, replaced atomically) and the CSV, one row per
metric and set.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from capsim.data.captions import write_json_atomically
from capsim.tables import format_table

CLUSTER_TEST = "perm_both"  # the clusters shown on screen and in the CSV


def _cell(value) -> str:
    if isinstance(value, dict):
        return f"{value['value']:.2f} [{value['ci_low']:.2f}, {value['ci_high']:.2f}]"
    return f"{value:.3g}" if isinstance(value, float) and abs(value) < 1 else f"{value:.2f}"


def _table(report: Mapping[str, dict], clusters: Mapping[str, int]) -> str:
    columns = list(next(iter(report.values())))
    rows = [
        {
            "metric": metric,
            **({"cluster": clusters.get(metric, "-")} if clusters else {}),
            **{c: _cell(v) for c, v in values.items()},
        }
        for metric, values in report.items()
    ]
    return format_table(rows, ["metric", *(["cluster"] if clusters else []), *columns])


def verdict(entry: Mapping[str, float]) -> str:
    """ "above", "below" or, when the interval of the difference holds 0, "level with", of a
    comparison of the JSON report (``delta``, ``ci_low``, ``ci_high``).

    >>> verdict({"delta": 0.4, "ci_low": -0.2, "ci_high": 1.1})
    'level with'
    >>> verdict({"delta": 9.2, "ci_low": 7.9, "ci_high": 10.6})
    'above'
    """
    if entry["ci_low"] <= 0 <= entry["ci_high"]:
        return "level with"
    return "above" if entry["delta"] > 0 else "below"


def _comparison_table(comparisons: Mapping[str, dict], baseline: str, statistic: str) -> str:
    rows = []
    for metric, others in comparisons.items():
        if metric == baseline or baseline not in others:
            continue
        entry = others[baseline]
        has_interval = "ci_low" in entry

        def shown(key: str, entry=entry) -> str:
            return f"{entry[key]:.3f}" if key in entry else "-"

        rows.append(
            {
                "metric": metric,
                f"Δ{statistic}": f"{entry['delta']:+.2f}",
                "95% interval": (
                    f"[{entry['ci_low']:+.2f}, {entry['ci_high']:+.2f}]" if has_interval else "-"
                ),
                "p (bootstrap)": shown("p_value"),
                "p (Williams)": shown("p_value_williams"),
                "p (PERM-BOTH, better)": shown("perm_both_p"),
                "reading": f"{verdict(entry)} {baseline}" if has_interval else "-",
            }
        )
    return format_table(rows, list(rows[0])) if rows else ""


def _finite_or_none(value):
    """NaN (e.g. a correlation with a constant metric) becomes null, so the file stays JSON."""
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _csv_rows(results: Mapping[str, dict], statistics: Mapping[str, str]) -> str:
    """One row per metric and set: the set's statistic (``statistics[set]``) with its
    interval and cluster."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["set", "metric", "statistic", "value", "ci_low", "ci_high", "cluster"])
    for name, entry in results.items():
        statistic = statistics[name]
        clusters = entry.get("clusters", {}).get(CLUSTER_TEST, {})
        for metric, values in entry["metrics"].items():
            value = values[statistic]
            low, high = (value["ci_low"], value["ci_high"]) if isinstance(value, dict) else ("", "")
            value = value["value"] if isinstance(value, dict) else value
            writer.writerow([name, metric, statistic, value, low, high, clusters.get(metric, "")])
    return out.getvalue()


def print_set(name: str, statistic: str, entry: Mapping, baseline: str) -> None:
    """The set's table (and its clusters), its comparisons with ``baseline`` on its
    ``statistic`` and the metrics that could not run."""
    seconds = entry["seconds"]
    print(
        f"\n{name}: {entry['judgments']} judgments; scored in {seconds['scoring']:.1f} s, "
        f"statistics in {seconds['statistics']:.1f} s",
        flush=True,
    )
    print(_table(entry["metrics"], entry.get("clusters", {}).get(CLUSTER_TEST, {})))
    table = _comparison_table(entry.get("comparisons", {}), baseline, statistic)
    if table:
        print(f"\nagainst {baseline} (p: that the metric beats it; PERM-BOTH one-sided):")
        print(table)
    for metric, reason in entry["skipped"].items():
        print(f"  {metric}: not reported ({reason})")


def write_results(
    results: dict, statistics: Mapping[str, str], out: Path, csv_path: Path | None = None
) -> None:
    """The JSON (``--out``, atomically, NaN as null) and the CSV (``--csv`` or beside it),
    each set's row headed by its statistic (``statistics``: set -> statistic)."""
    write_json_atomically(out, _finite_or_none(results))
    csv_path = csv_path or out.with_suffix(".csv")
    csv_path.write_text(_csv_rows(results["sets"], statistics), encoding="utf-8")
    print(f"\nwrote {out} and {csv_path}", file=sys.stderr)
