"""How long the test tiers take from a clean clone (issue 31 §2).

    python tools/suite_time.py                           # HEAD's fast and slow tiers
    python tools/suite_time.py --tiers '' --ref 54cda80 --append  # an earlier commit's fast tier

Each tier is the README's command, ``python -m pytest -q`` (the fast tier) or with
``-m slow`` / ``-m bench``, run in a fresh ``git clone`` of the commit made beside this
repository (so ../shared/data is found), with this interpreter's packages. It reports
wall seconds, tests passed/failed/skipped, the load average before and after (run it
on an otherwise idle machine: the figure is an absolute time, promised for 2 cores), the
sum of test seconds per file and the slowest tests (pytest's JUnit XML; with -n 2 the
per-file sums add the two workers' time). Results: bench/RESULTS.md, "Test suite tiers".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import collections
import json
import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET

from bench.harness import REPO, RESULTS_DIR, load_average, record_results
from capsim.tables import format_table

SECTION = "## Test suite tiers"
TIERS = {"fast": [], "slow": ["-m", "slow"], "bench": ["-m", "bench"]}
SLOWEST = 15


def clone(commit: str) -> Path:
    """A fresh clone of ``commit`` beside this repository (where ../shared is found)."""
    dest = REPO.parent / f".suite-time-{commit[:12]}"
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", commit], check=True)
    return dest


def junit_cases(junit: Path) -> list[tuple[str, str, float]]:
    """(test_file::test, outcome, seconds) of every test case in pytest's JUnit XML."""
    cases = []
    for case in ET.parse(junit).iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]  # tests.test_x -> test_x
        tags = {child.tag for child in case} & {"skipped", "failure", "error"}
        outcome = "skipped" if "skipped" in tags else "failed" if tags else "passed"
        cases.append((f"{module}::{case.get('name')}", outcome, float(case.get("time", 0))))
    return cases


def read_junit(junit: Path) -> dict:
    """Counts of passed/failed/skipped, seconds per test file, and the slowest tests."""
    per_file: collections.Counter = collections.Counter()
    counts: collections.Counter = collections.Counter()
    tests = []
    for name, outcome, seconds in junit_cases(junit):
        per_file[name.split("::")[0]] += seconds
        tests.append((seconds, name))
        counts[outcome] += 1
    return {
        "counts": {key: counts[key] for key in ("passed", "failed", "skipped")},
        "per_file_s": {name: round(s, 1) for name, s in per_file.most_common()},
        "slowest": [(round(s, 1), name) for s, name in sorted(tests, reverse=True)[:SLOWEST]],
    }


def run_tier(checkout: Path, tier: str) -> dict:
    """Runs one tier in ``checkout``: its wall time and load, and read_junit's figures."""
    junit = checkout / "junit.xml"
    command = [sys.executable, "-m", "pytest", "-q", *TIERS[tier], f"--junitxml={junit}"]
    # Cold caches of its own, as on a fresh machine: JAX's compilation cache (for commits
    # whose tests kept one across runs) and capsim's (METEOR's paraphrase index, ~45 s).
    env = dict(
        os.environ,
        CAPSIM_TEST_JAX_CACHE=str(checkout / ".jax-cache"),
        CAPSIM_CACHE_DIR=str(checkout / ".capsim-cache"),
    )
    load_before, began = load_average(), time.perf_counter()
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    print(done.stdout[-1500:], file=sys.stderr)
    return {
        "tier": tier,
        "command": " ".join(["python -m pytest -q", *TIERS[tier]]),
        "returncode": done.returncode,
        "wall_s": round(wall, 1),
        "load_before": load_before,
        "load_after": load_average(),
        **read_junit(junit),
    }


def tables(rows: list[dict]) -> str:
    """The summary table, then per tier the ten costliest files and the slowest tests."""
    summary = [
        {
            "commit": row["commit"],
            "tier": row["tier"],
            "command": f"`{row['command']}`",
            "wall s": f"{row['wall_s']:.0f}",
            "passed": row["counts"].get("passed", 0),
            "failed": row["counts"].get("failed", 0),
            "skipped": row["counts"].get("skipped", 0),
            "load before / after": f"{row['load_before']:.2f} / {row['load_after']:.2f}",
        }
        for row in rows
    ]
    parts = [format_table(summary, list(summary[0]))]
    for row in rows:
        files = [{"file": n, "s": f"{s:.1f}"} for n, s in list(row["per_file_s"].items())[:10]]
        slowest = [{"s": f"{s:.1f}", "test": n} for s, n in row["slowest"]]
        parts += [
            f"\n{row['commit']} {row['tier']}: test seconds per file (the ten costliest)\n",
            format_table(files, ["file", "s"]),
            f"\n{row['commit']} {row['tier']}: the slowest tests\n",
            format_table(slowest, ["s", "test"]),
        ]
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiers", default="fast,slow", help="comma-separated: fast, slow, bench")
    parser.add_argument("--ref", default="", help="also run the fast tier of this commit")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--append", action="store_true", help="keep the rows of other commits and tiers"
    )
    args = parser.parse_args()
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    jobs = [(head, tier) for tier in args.tiers.split(",") if tier]
    if args.ref:
        jobs.append((args.ref, "fast"))
    rows = []
    for commit, tier in jobs:
        checkout = clone(commit)
        print(f"{commit} {tier}: {' '.join(TIERS[tier]) or '(fast)'} ...", file=sys.stderr)
        rows.append({"commit": commit, **run_tier(checkout, tier)})
        shutil.rmtree(checkout, ignore_errors=True)
    results_json = RESULTS_DIR / "suite_time.json"
    if args.append and results_json.exists():
        new = {(row["commit"], row["tier"]) for row in rows}
        kept = json.loads(results_json.read_text())
        rows = [row for row in kept if (row["commit"], row["tier"]) not in new] + rows
    text = tables(rows)
    print(text)
    if not args.no_write:
        record_results("suite_time", rows, SECTION, text)
    return 0 if all(row["returncode"] == 0 for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
