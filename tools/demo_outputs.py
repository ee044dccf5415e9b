"""Every demo config's outputs, as digests, for two commits side by side (issue 33).

    python tools/demo_outputs.py --ref 8d66ab8 [--full]   # HEAD against an earlier commit
    python tools/demo_outputs.py --ref 8d66ab8 --reuse-ref # the ref's digests from the last run

A refactor that must not change behaviour shows it here: each training config runs
on the embedded shapes world (``runlocal``: a few steps, every evaluation kept; the
two main demos also in full with ``--full``) in a fresh ``git clone`` of each commit,
seeded as the config says, and the table compares the sha256 of ``metrics.jsonl`` and
``results.json``. Wall-clock figures (``examples_per_second``) differ between any two
runs, so those keys are dropped before hashing; nothing else is. Results:
bench/RESULTS.md, "Demo outputs before and after".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import hashlib
import json
import os
import shutil
import subprocess

from bench.harness import REPO, RESULTS_DIR, record_results
from capsim.tables import format_table
from tools.suite_time import clone

SECTION = "## Demo outputs before and after"
SHAPES = "source=shapes_world"
# (name, training module, config argument); every one runs with runlocal=True.
RUNS = [
    ("demo_bow", "vtfn_jax.train", "configs/demo_bow.py"),
    ("demo_cnn", "vtfn_jax.train", "configs/demo_cnn.py"),
    ("demo_gru", "vtfn_jax.train", "configs/demo_gru.py"),
    ("demo_lstm", "vtfn_jax.train", "configs/demo_lstm.py"),
    ("demo_bow pivot", "vtfn_jax.train", "configs/demo_bow.py:pivot=0.5"),
    ("glove_nr", "vtfn_jax.train", f"configs/baseline_glove_nr.py:{SHAPES}"),
    ("glove_r", "vtfn_jax.train", f"configs/baseline_glove_r.py:{SHAPES}"),
    ("word2vec", "vtfn_jax.train", f"configs/baseline_word2vec.py:{SHAPES}"),
    ("pure_text_rnn", "vtfn_jax.train", f"configs/baseline_pure_text_rnn.py:{SHAPES}"),
    ("pin_model_a", "vtfn_jax.train", f"configs/baseline_pin_model_a.py:{SHAPES}"),
    ("i2ce_demo", "i2ce_jax.train", "configs/i2ce_demo.py"),
    ("i2ce_demo margin", "i2ce_jax.train", "configs/i2ce_demo.py:loss=margin"),
    ("i2ce_demo triplet", "i2ce_jax.train", "configs/i2ce_demo.py:loss=triplet"),
    ("i2ce_demo recon", "i2ce_jax.train", "configs/i2ce_demo.py:loss=none"),
]
FULL = [("demo_bow", "vtfn_jax.train", "configs/demo_bow.py"), RUNS[10]]
TIMING_KEYS = ("examples_per_second",)


def without_timing(value: object) -> object:
    """``value`` with every key that names a wall-clock rate removed, at any depth."""
    if isinstance(value, dict):
        return {
            key: without_timing(item)
            for key, item in value.items()
            if not any(word in key for word in TIMING_KEYS)
        }
    if isinstance(value, list):
        return [without_timing(item) for item in value]
    return value


def digest(path: Path, lines: bool) -> str:
    """sha256 (first 16 hex digits) of a JSON file, or of a JSON-lines file, less timing."""
    text = path.read_text()
    rows = [json.loads(line) for line in text.splitlines()] if lines else [json.loads(text)]
    canonical = "\n".join(json.dumps(without_timing(row)) for row in rows)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def run_config(checkout: Path, out: Path, module: str, config: str, full: bool) -> dict:
    """Trains one config in ``checkout``; the digests of its outputs."""
    out.mkdir(parents=True)
    config_arg = config if full else f"{config}{',' if ':' in config else ':'}runlocal=True"
    command = [sys.executable, "-m", module, f"--config={config_arg}", f"--workdir={out}"]
    env = dict(os.environ, PYTHONPATH=str(checkout))
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed in {checkout}:\n{done.stderr[-3000:]}")
    return {
        "metrics.jsonl": digest(out / "metrics.jsonl", lines=True)
        if (out / "metrics.jsonl").exists()
        else "(none)",
        "results.json": digest(out / "results.json", lines=False),
    }


def run_commit(commit: str, full: bool) -> list[dict]:
    """Every run of RUNS (and FULL with ``full``) in a fresh clone of ``commit``."""
    runs = [(name, module, config, False) for name, module, config in RUNS]
    runs += [(f"{name} (full)", module, config, True) for name, module, config in FULL] * full
    checkout = clone(commit)
    sha = short_sha(checkout, "HEAD")
    outputs = checkout.parent / f".demo-outputs-{sha}"
    rows = []
    for index, (name, module, config, whole) in enumerate(runs):
        print(f"{sha} {name} ...", file=sys.stderr, flush=True)
        digests = run_config(checkout, outputs / str(index), module, config, whole)
        rows.append({"commit": sha, "run": name, **digests})
    shutil.rmtree(checkout, ignore_errors=True)
    shutil.rmtree(outputs, ignore_errors=True)
    return rows


def short_sha(repo: Path, commit: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", commit],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def comparison(rows: list[dict], head: str, ref: str) -> list[dict]:
    """One row per run: both commits' digests and whether they are equal."""
    by_run: dict = {}
    for row in rows:
        if row["commit"] in (head, ref):
            by_run.setdefault(row["run"], {})[row["commit"]] = row
    table = []
    for name, pair in by_run.items():
        if len(pair) < 2:
            continue
        same = all(pair[head][key] == pair[ref][key] for key in ("metrics.jsonl", "results.json"))
        table.append(
            {
                "run": name,
                f"metrics.jsonl {head}": pair[head]["metrics.jsonl"],
                f"metrics.jsonl {ref}": pair[ref]["metrics.jsonl"],
                f"results.json {head}": pair[head]["results.json"],
                f"results.json {ref}": pair[ref]["results.json"],
                "equal": "yes" if same else "NO",
            }
        )
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", required=True, help="the commit to compare HEAD with")
    parser.add_argument(
        "--reuse-ref", action="store_true", help="take the ref's rows from an earlier run"
    )
    parser.add_argument("--full", action="store_true", help="also the two main demos in full")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    head, ref = short_sha(REPO, "HEAD"), short_sha(REPO, args.ref)
    results_json = RESULTS_DIR / "demo_outputs.json"
    kept = json.loads(results_json.read_text()) if results_json.exists() else []
    rows = run_commit(head, args.full)
    if args.reuse_ref:
        rows += [row for row in kept if row["commit"] == ref]
    else:
        rows += run_commit(ref, args.full)
    table = comparison(rows, head, ref)
    text = format_table(table, list(table[0]))
    print(text)
    if not args.no_write:
        record_results("demo_outputs", rows, SECTION, text)
    return 0 if all(row["equal"] == "yes" for row in table) else 1


if __name__ == "__main__":
    sys.exit(main())
