"""bench/throughput.py's CPU training rows at two commits: did a change slow them? (issue 48 §2)

    python tools/throughput_commits.py --ref ebb3de6 [--steps 3] [--rounds 3] [--repeats 2]
                                       [--models I2CE-paper-scale VTFN-BOW ...]

Every row of bench/throughput.py's training table by default (TRAINING_MODELS).

Each commit is cloned fresh (tools.suite_time.clone) and each model's row
(bench.throughput_tables.training.measure_training: the JAX step against its PyTorch twin on
identical batches, alternating rounds) runs in a process of that clone; the commits
alternate per model and repeat (the ref first, then HEAD first, ...). The twin is the
same code at both commits, so the yardstick is the JAX / PyTorch ratio: HEAD's median
ratio over the ref's is the change in the JAX step, with the load swings of the runs
divided out. Writes bench/results/throughput_commits.json and bench/RESULTS.md's
section "Throughput rows at two commits".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import os
import shutil
import subprocess

import numpy as np

from bench.cases.catalogue import TRAINING_MODELS
from bench.harness import REPO, load_average, record_results
from capsim.tables import format_table
from tools.demo_outputs import short_sha
from tools.suite_time import clone

SECTION = "## Throughput rows at two commits"
# One row, in a process of the checkout: its capsim is the checkout's (PYTHONPATH first).
ROW = """
import json, sys
import capsim
try:
    from bench.throughput_tables import training as t
except ImportError:  # a commit from before bench/ was grouped by purpose (issue 55)
    from bench import throughput_training as t
t.use_every_core()
row = t.measure_training(sys.argv[1], steps=int(sys.argv[2]), warmup=2, rounds=int(sys.argv[3]))
row["capsim"] = capsim.__file__
print("ROW " + json.dumps(row))
"""


def measure(checkout: Path, model: str, steps: int, rounds: int) -> dict:
    """measure_training's row for ``model``, run by ``checkout``'s code."""
    done = subprocess.run(
        [sys.executable, "-c", ROW, model, str(steps), str(rounds)],
        cwd=checkout,
        env=dict(os.environ, PYTHONPATH=str(checkout)),
        capture_output=True,
        text=True,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("ROW ")]
    if done.returncode or not lines:
        raise RuntimeError(f"{model} in {checkout} failed:\n{done.stderr[-3000:]}")
    row = json.loads(lines[-1][4:])
    if not row["capsim"].startswith(str(checkout)):
        raise RuntimeError(f"{checkout} ran another capsim: {row['capsim']}")
    return row


def compare(runs: list[dict], head: str, ref: str) -> list[dict]:
    """Per model: each commit's JAX / PyTorch ratios, and HEAD's median over the ref's."""
    table = []
    for model in dict.fromkeys(run["model"] for run in runs):
        ratios = {
            sha: [r["ratio_median"] for r in runs if r["model"] == model and r["commit"] == sha]
            for sha in (ref, head)
        }
        table.append(
            {
                "model": model,
                f"JAX/PyTorch at {ref}": ", ".join(f"{x:.2f}" for x in ratios[ref]),
                f"JAX/PyTorch at {head}": ", ".join(f"{x:.2f}" for x in ratios[head]),
                f"{head} / {ref}": f"{np.median(ratios[head]) / np.median(ratios[ref]):.2f}",
            }
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", required=True, help="the commit to compare HEAD with")
    parser.add_argument("--steps", type=int, default=3, help="steps per round per side")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per row")
    parser.add_argument("--repeats", type=int, default=2, help="rows per model and commit")
    parser.add_argument("--models", nargs="+", default=list(TRAINING_MODELS))
    args = parser.parse_args()
    head, ref = short_sha(REPO, "HEAD"), short_sha(REPO, args.ref)
    checkouts = {ref: clone(args.ref), head: clone("HEAD")}
    runs = []
    try:
        for model in args.models:
            for repeat in range(args.repeats):
                order = [ref, head] if repeat % 2 == 0 else [head, ref]
                for sha in order:
                    load = load_average()
                    row = measure(checkouts[sha], model, args.steps, args.rounds)
                    runs.append({"commit": sha, "model": model, "load": load, **row})
                    print(f"{model} at {sha}: JAX/PyTorch {row['ratio_median']:.2f}", flush=True)
    finally:
        for checkout in checkouts.values():
            shutil.rmtree(checkout, ignore_errors=True)
    rows = compare(runs, head, ref)
    table = format_table(rows, list(rows[0]))
    loads = [run["load"] for run in runs]
    text = (
        f"HEAD {head} against {ref}; {args.steps} steps a round, {args.rounds} rounds a row, "
        f"{args.repeats} rows per model and commit, alternating; load average "
        f"{min(loads):.2f}-{max(loads):.2f}.\n\n{table}"
    )
    print(text)
    record_results("throughput_commits", runs, SECTION, text)


if __name__ == "__main__":
    main()
