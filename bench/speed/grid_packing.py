"""A grid as a user runs it: the whole ``launch.sweep`` command, packed against a process a job.

    python bench/speed/grid_packing.py [--seeds 8] [--rounds 2] [--write]

The grid: the shapes-world VTFN-BOW demo job (configs/demo_bow.py) over ``--seeds``
seeds. Each setting runs the whole command, from its start to its end, in a fresh
folder: ``--jobs 2`` (a process a job, two at once), ``--pack`` all seeds in one
process (vmapped, the default for this model on CPU, and in turn), and two processes
of half the seeds each. Rounds alternate the settings. Prints the table; ``--write`` records it in
bench/results/grid_packing.json and bench/RESULTS.md ("Grids on one machine").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import statistics
import tempfile
import textwrap

from bench.harness import load_average, record_results, time_sweep
from capsim.tables import format_table

SECTION = "## Grids on one machine (issue 53)"
GRID_CONFIG = """
from configs import demo_bow
from configs.sweep_vtfn import METRICS

TRAIN_MODULE = "vtfn_jax.train"


def get_config(arg=None):
    return demo_bow.get_config()


def get_sweep(hyper, arg=None):
    return hyper.sweep("config.seed", list(range({seeds})))
"""


def settings(seeds: int) -> dict[str, list[str]]:
    return {
        "--jobs 2 --pack 1 (a process a job)": ["--jobs", "2", "--pack", "1"],
        f"--pack {seeds} (one process; auto: vmapped)": ["--pack", str(seeds)],
        f"--pack {seeds} --member_mode in_turn": [
            "--pack",
            str(seeds),
            "--member_mode",
            "in_turn",
        ],
        f"--pack {seeds // 2} --jobs 2 (auto: vmapped)": ["--pack", str(seeds // 2), "--jobs", "2"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    runs = settings(args.seeds)
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "grid_demo_bow.py"
        config.write_text(textwrap.dedent(GRID_CONFIG.format(seeds=args.seeds)))
        for round_index in range(args.rounds):
            order = list(runs) if round_index % 2 == 0 else list(runs)[::-1]
            for name in order:
                workdir = Path(tmp) / f"round{round_index}-{len(seconds[name])}-{hash(name)}"
                seconds[name].append(time_sweep(config, workdir, runs[name]))
    load_after = load_average()
    baseline = next(iter(runs))
    rows = []
    for name, values in seconds.items():
        ratios = [b / s for b, s in zip(seconds[baseline], values, strict=True)]
        rows.append(
            {
                "command": name,
                "wall s, median [min, max]": f"{statistics.median(values):.1f} "
                f"[{min(values):.1f}, {max(values):.1f}]",
                "per job s": f"{statistics.median(values) / args.seeds:.2f}",
                "speed-up over a process a job, median [min, max]": f"{statistics.median(ratios):.2f} "
                f"[{min(ratios):.2f}, {max(ratios):.2f}]",
            }
        )
    text = "\n\n".join(
        [
            f"The shapes-world VTFN-BOW demo job (configs/demo_bow.py, 375 steps) over "
            f"{args.seeds} seeds, the whole `python -m launch.sweep` command timed from start "
            f"to end; {args.rounds} alternating rounds on 2 cores, load {load_before:.2f} "
            f"before, {load_after:.2f} after. A pack's members run as the flags say "
            f"(launch.pack; auto takes capsim.train.members.member_mode's choice).",
            format_table(rows, list(rows[0])),
        ]
    )
    print(text)
    if args.write:
        record_results("grid_packing", [{"seconds": seconds, "rows": rows}], SECTION, text)


if __name__ == "__main__":
    main()
