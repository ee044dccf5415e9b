"""A paper table's grid as the paper's table: each cell our mean over seeds with its 95%
interval, and under it every claim of the table with its verdict (launch.paper_table).

    python -m launch.report --config=configs/tables/vtfn_t4_losses.py:seeds=5 --workdir=runs/vtfn_t4

Writes ``WORKDIR/table.md`` and ``WORKDIR/table.json`` beside the grid's ``results.md``
(``launch.sweep`` writes them too, at the end of a table config's grid, locally or on
SLURM: launch.finish). The config and its argument are the ones the grid ran with.
Claims whose rows are not all in the grid (a sub-grid) are listed as not evaluated,
naming the rows.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from launch.grid import load_config_module
from launch.paper_table import Table
from launch.paper_table.output import TABLE_JSON, TABLE_MARKDOWN, render_markdown, write_table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="table config file[:arg], as the grid ran")
    parser.add_argument("--workdir", required=True, help="the grid's workdir")
    args = parser.parse_args(argv)
    config_file, _, arg = args.config.partition(":")
    try:
        module = load_config_module(config_file)
        if not isinstance(getattr(module, "TABLE", None), Table):
            raise AttributeError(f"grid config {config_file} defines no TABLE (a paper table)")
        if not Path(args.workdir).is_dir():
            raise FileNotFoundError(f"workdir {args.workdir} does not exist")
        report = write_table(args.workdir, module, arg)
    except (AttributeError, FileNotFoundError, KeyError) as error:
        message = error.args[0] if isinstance(error, KeyError) else error
        print(f"launch.report: {message}", file=sys.stderr)
        return 2
    sys.stdout.write(render_markdown(report))
    print(f"wrote {Path(args.workdir) / TABLE_MARKDOWN} and {Path(args.workdir) / TABLE_JSON}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
