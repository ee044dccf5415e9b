"""A long-caption pair set judged by ``capsim.metaeval``, and its table: shared by
long_captions.py and contrast_training.py."""

from __future__ import annotations

from pathlib import Path

from capsim import metaeval
from capsim.tables import format_cells


def metaeval_args(judgments: str, out: Path, bootstrap: int, metrics: str | None) -> object:
    """``capsim.metaeval``'s arguments: the sets, the JSON out, resamples, the metrics."""
    argv = ["--judgments", judgments, "--bootstrap", str(bootstrap), "--seed", "0"]
    argv += ["--out", str(out)] + (["--metrics", metrics] if metrics else [])
    return metaeval.parser().parse_args(argv)


def report_table(result: dict) -> str:
    """Accuracy [95%], cluster and per-category accuracy of each metric, best first."""
    entry = next(iter(result["sets"].values()))
    clusters = entry.get("clusters", {}).get("perm_both", {})
    categories = sorted({k for m in entry["metrics"].values() for k in m} - {"accuracy"})
    header = ["metric", "cluster", "accuracy [95%]", *categories]
    ranked = sorted(entry["metrics"], key=lambda m: -entry["metrics"][m]["accuracy"]["value"])
    cells = []
    for metric in ranked:
        values = entry["metrics"][metric]
        cell = values["accuracy"]
        cells.append(
            [metric, str(clusters.get(metric, "-")),
             f"{cell['value']:.2f} [{cell['ci_low']:.2f}, {cell['ci_high']:.2f}]",
             *(f"{values[c]['value']:.2f}" for c in categories)]
        )  # fmt: skip
    return format_cells(header, cells)
