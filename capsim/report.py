"""A finished run as pictures: ``python -m capsim.report WORKDIR``.

Writes ``WORKDIR/report/training_curves.png`` (loss, dev AUC, examples/s from
metrics.jsonl) and ``WORKDIR/report.md``, which embeds it beside the run's
results table (results.json). Works for any run of either paper.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from capsim.tables import format_table, results_rows
from capsim.viz import training_curves
from capsim.workdir import METRICS_FILE, RESULTS_FILE

REPORT_DIR = "report"


def write_report(workdir: str | Path) -> Path:
    """Draws the run's plots and writes report.md; returns its path."""
    workdir = Path(workdir)
    metrics = workdir / METRICS_FILE
    if not metrics.exists():
        raise FileNotFoundError(f"{workdir} has no metrics.jsonl: is it a training workdir?")
    curves = workdir / REPORT_DIR / "training_curves.png"
    training_curves(metrics, curves)
    lines = [
        f"# Run report: {workdir.name}",
        "",
        f"![training curves]({REPORT_DIR}/{curves.name})",
        "",
    ]
    results_file = workdir / RESULTS_FILE
    if results_file.exists():
        rows = results_rows(json.loads(results_file.read_text()))
        lines += ["## Results", "", format_table(rows, ["task", "measure", "value"]), ""]
    report = workdir / "report.md"
    report.write_text("\n".join(lines))
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir")
    args = parser.parse_args(argv)
    print(f"wrote {write_report(args.workdir)}")


if __name__ == "__main__":
    main()
