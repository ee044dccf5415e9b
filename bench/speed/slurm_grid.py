"""The scheduler's overhead: a grid sent to a real one-node SLURM against the same grid run
locally, the whole ``launch.sweep`` command timed.

    python tools/local_slurm.py start --dir /tmp/slurm --install   # as root, once
    export SLURM_CONF=/tmp/slurm/slurm.conf
    python bench/speed/slurm_grid.py [--arg ARG] [--rounds 3] [--write]

The grid: configs/sweep_vtfn.py with ``--arg`` (default: the shapes-world VTFN-BOW job over
4 seeds, the sweep's own 20 epochs with early stopping), ``--pack 2``, so two packs. Locally they run as two processes at once
(``--jobs 2``); on SLURM as one job array of two tasks, one CPU each, on the cluster that
``SLURM_CONF`` names: the figures here are of the one-node cluster that tools/local_slurm.py
starts on this machine (Debian's slurmctld, slurmd and munge; as root), followed with
``--wait --poll_seconds 1``. Rounds alternate the two. Each grid ends
with every job's results.json. Prints the table; ``--write`` records it in
bench/results/slurm_grid.json and bench/RESULTS.md ("Grids on a SLURM cluster").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import os
import statistics
import tempfile

from bench.harness import REPO, load_average, record_results, time_sweep
from capsim.tables import format_table

SECTION = "## Grids on a SLURM cluster (issue 59)"
DEFAULT_ARG = "dataset=shapes_world,encoder=bow_sum,loss=pearson,seeds=4"
SETTINGS = {
    "local: --pack 2 --jobs 2": ["--pack", "2", "--jobs", "2"],
    "slurm: --pack 2 --cluster=slurm --wait": [
        "--pack",
        "2",
        "--cluster=slurm",
        "--wait",
        "--poll_seconds=1",
        "--cpus_per_task=1",
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arg", default=DEFAULT_ARG, help="configs/sweep_vtfn.py's argument")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    config = f"{REPO / 'configs' / 'sweep_vtfn.py'}:{args.arg}"
    seconds: dict[str, list[float]] = {name: [] for name in SETTINGS}
    if not os.environ.get("SLURM_CONF"):
        sys.exit("slurm_grid: no SLURM_CONF: start one (python tools/local_slurm.py start)")
    with tempfile.TemporaryDirectory() as tmp:
        load_before = load_average()
        for round_index in range(args.rounds):
            order = list(SETTINGS) if round_index % 2 == 0 else list(SETTINGS)[::-1]
            for name in order:
                workdir = Path(tmp) / f"round{round_index}-{name.split(':')[0]}"
                seconds[name].append(time_sweep(config, workdir, SETTINGS[name]))
                print(f"round {round_index + 1}: {name}: {seconds[name][-1]:.1f} s", flush=True)
        load_after = load_average()
    local, remote = seconds.values()
    overheads = [r - lo for lo, r in zip(local, remote, strict=True)]
    ratios = [r / lo for lo, r in zip(local, remote, strict=True)]
    rows = [
        {
            "command": name,
            "wall s, median [min, max]": f"{statistics.median(values):.1f} "
            f"[{min(values):.1f}, {max(values):.1f}]",
        }
        for name, values in seconds.items()
    ]
    rows.append(
        {
            "command": "SLURM's overhead (slurm - local, same round)",
            "wall s, median [min, max]": f"{statistics.median(overheads):.1f} "
            f"[{min(overheads):.1f}, {max(overheads):.1f}]; slurm / local "
            f"{statistics.median(ratios):.2f} [{min(ratios):.2f}, {max(ratios):.2f}]",
        }
    )
    text = "\n\n".join(
        [
            f"configs/sweep_vtfn.py:{args.arg}, two packs of two seeds; the whole "
            f"`python -m launch.sweep` command timed from start to end; {args.rounds} "
            f"alternating rounds on 2 cores, load {load_before:.2f} before, {load_after:.2f} "
            "after. SLURM: a one-node cluster on this machine (tools/local_slurm.py), one "
            "CPU a task, `--wait --poll_seconds 1` (the default poll is 30 s).",
            format_table(rows, list(rows[0])),
        ]
    )
    print(text)
    if args.write:
        record_results("slurm_grid", [{"seconds": seconds, "rows": rows}], SECTION, text)


if __name__ == "__main__":
    main()
