"""A grid's one ending, wherever it ran: ``results.csv`` and ``results.md`` for every
grid (launch.aggregate) and, for a paper table's config, ``table.md`` and ``table.json``
(launch.paper_table). The local run (launch.sweep) and the SLURM ``--wait`` and
``--status`` (launch.slurm_status) both end here, so a grid writes the same files
wherever its jobs trained.
"""

from __future__ import annotations

import types
from pathlib import Path

from launch.aggregate import aggregate
from launch.paper_table import Table
from launch.paper_table.output import TABLE_JSON, TABLE_MARKDOWN, write_table


def finish_grid(workdir: str | Path, module: types.ModuleType, arg: str = "") -> None:
    """Writes the grid's tables under ``workdir`` from its job folders; ``module`` and
    ``arg`` are the grid config and its argument, as the grid ran."""
    workdir = Path(workdir)
    aggregate(workdir, module.METRICS)
    print(f"wrote {workdir / 'results.csv'} and {workdir / 'results.md'}")
    if isinstance(getattr(module, "TABLE", None), Table):  # its layout and claims' verdicts
        write_table(workdir, module, arg)
        print(f"wrote {workdir / TABLE_MARKDOWN} and {workdir / TABLE_JSON}")
