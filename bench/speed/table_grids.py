"""A paper table's seeded grid as a user runs it: packed against a process a job, and the
table it writes (issue 63).

    python bench/speed/table_grids.py --table vtfn_t4_losses [--arg seeds=5] [--rounds 1] [--write]
    python bench/speed/table_grids.py --table vtfn_t3_encoders --packed_only --write

Each setting runs the whole ``python -m launch.sweep --config=configs/tables/TABLE.py:ARG``
command in a fresh folder, two jobs at once: ``--pack SEEDS`` (a row's seeds trained by
one process, vmapped where the model allows) and ``--pack 1`` (a process a job). Rounds
alternate the order. The packed run's report (table.md, table.json: launch.report) is the
table; the two settings' cells are compared, as packing must not change what is trained.
Prints both; ``--write`` records the timing in bench/results/table_grids_TABLE.json and
bench/RESULTS.md ("Paper tables as seeded grids (issue 63): TABLE"), and the packed run's
report as bench/results/tables/TABLE.md and .json.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import shutil
import statistics
import tempfile

from bench.harness import REPO, RESULTS_DIR, load_average, record_results, time_sweep
from capsim.tables import format_table
from launch.grid import expand_grid, load_config_module
from launch.report import TABLE_JSON, TABLE_MARKDOWN

SECTION = "## Paper tables as seeded grids (issue 63)"
TABLES_DIR = RESULTS_DIR / "tables"


def settings(seeds: int) -> dict[str, list[str]]:
    return {
        f"--pack {seeds} --jobs 2 (a row's seeds in one process)": ["--pack", str(seeds)],
        "--pack 1 --jobs 2 (a process a job)": ["--pack", "1"],
    }


def largest_cell_difference(first: dict, second: dict) -> float:
    """The largest difference between two reports' cell means (0 for the same grid)."""
    means = [
        (a["cells"][c].get("mean"), b["cells"][c].get("mean"))
        for a, b in zip(first["rows"], second["rows"], strict=True)
        for c in a["cells"]
    ]
    return max((abs(x - y) for x, y in means if x is not None and y is not None), default=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", required=True, help="a config's name in configs/tables/")
    parser.add_argument("--arg", default="seeds=5", help="the table config's argument")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--packed_only", action="store_true", help="the table alone: no --pack 1 run, no ratio"
    )
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    config_file = REPO / "configs" / "tables" / f"{args.table}.py"
    jobs = expand_grid(load_config_module(config_file), args.arg)
    seeds = len({job.params["seed"] for job in jobs})
    runs = settings(seeds)
    if args.packed_only:
        runs = dict([next(iter(runs.items()))])
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    reports: dict[str, dict] = {}  # each setting's table.json, and the packed run's table.md
    table_markdown = ""
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        for round_index in range(args.rounds):
            order = list(runs) if round_index % 2 == 0 else list(runs)[::-1]
            for index, name in enumerate(order):
                workdir = Path(tmp) / f"round{round_index}-{index}"
                flags = ["--jobs", "2", *runs[name]]
                seconds[name].append(time_sweep(f"{config_file}:{args.arg}", workdir, flags))
                print(f"round {round_index}, {name}: {seconds[name][-1]:.0f} s", flush=True)
                reports[name] = json.loads((workdir / TABLE_JSON).read_text())
                if name != next(iter(runs)):
                    continue
                table_markdown = (workdir / TABLE_MARKDOWN).read_text()
                if args.write:
                    TABLES_DIR.mkdir(parents=True, exist_ok=True)
                    for file in (TABLE_MARKDOWN, TABLE_JSON):
                        shutil.copy(workdir / file, TABLES_DIR / f"{args.table}{Path(file).suffix}")
    load_after = load_average()
    packed = next(iter(runs))
    rows = [
        {
            "command": name,
            "wall s, median [min, max]": f"{statistics.median(values):.0f} "
            f"[{min(values):.0f}, {max(values):.0f}]",
            "per job s": f"{statistics.median(values) / len(jobs):.1f}",
        }
        for name, values in seconds.items()
    ]
    if args.packed_only:
        comparison = "Not run with `--pack 1` (`--packed_only`): no ratio."
        difference = None
    else:
        solo = list(runs)[1]
        ratios = [s / p for s, p in zip(seconds[solo], seconds[packed], strict=True)]
        difference = largest_cell_difference(reports[packed], reports[solo])
        comparison = (
            f"Packed over a process a job: {statistics.median(ratios):.2f}x "
            f"[{min(ratios):.2f}, {max(ratios):.2f}]. The largest difference between the "
            f"two settings' cell means: {difference:.4f} (in the table's units)."
        )
    text = "\n\n".join(
        [
            f"`configs/tables/{args.table}.py:{args.arg}`, {len(jobs)} jobs ({seeds} seeds a "
            f"row), the whole `python -m launch.sweep` command timed from start to end; "
            f"{args.rounds} round(s), alternating, on 2 cores, load {load_before:.2f} before, "
            f"{load_after:.2f} after.",
            format_table(rows, list(rows[0])),
            f"{comparison} The table: `bench/results/tables/{args.table}.md`.",
        ]
    )
    print(table_markdown)
    print(text)
    if args.write:
        record_results(
            "table_grids",
            {"seconds": seconds, "rows": rows, "largest_cell_difference": difference},
            SECTION,
            text,
            tag=args.table,
        )


if __name__ == "__main__":
    main()
