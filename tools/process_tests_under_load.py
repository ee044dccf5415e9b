"""The tests that start processes, run again and again beside busy cores (issue 31 §3).

    python tools/process_tests_under_load.py --rounds 10
    python tools/process_tests_under_load.py --rounds 1 --files tests/test_cache.py  # a try

The test files that start processes (subprocess, signals, the JVM) are found by
reading them. Each round runs them with the README's command (``python -m pytest -q``,
the fast tier) while a CPU-bound process spins on every core, and records each test's
outcome and seconds (pytest's JUnit XML). The table: per test, rounds passed, median
and slowest seconds; with the load average at the start and the end. Results:
bench/RESULTS.md, "Process tests under load".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import ast
import collections
import contextlib
import json
import os
import statistics
import subprocess
import tempfile
from collections.abc import Iterator

from bench.harness import REPO, RESULTS_DIR, load_average, update_section
from capsim.tables import format_table
from tools.suite_time import junit_cases

SECTION = "## Process tests under load"
# What a test file imports (or reaches through import_extra) when it starts processes:
# its own, a JVM (pycocoevalcap's METEOR jar and PTBTokenizer) or a notebook kernel.
PROCESS_MODULES = {"subprocess", "signal", "multiprocessing", "nbclient", "pycocoevalcap"}
EXTRA_IMPORTS = {"import_extra", "importorskip", "requires"}
SPIN = "while True: pass"


def _extra_import(call: ast.Call) -> bool:
    """import_extra("M") and the like, with M written out."""
    name = getattr(call.func, "id", getattr(call.func, "attr", ""))
    return name in EXTRA_IMPORTS and bool(call.args) and isinstance(call.args[0], ast.Constant)


def process_test_files(tests: Path = REPO / "tests") -> list[Path]:
    """The test files that import a module that starts or signals processes."""
    found = []
    for path in sorted(tests.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module.split(".")[0])
            elif isinstance(node, ast.Call) and _extra_import(node):
                names.add(str(node.args[0].value).split(".")[0])
        if names & PROCESS_MODULES:
            found.append(path)
    return found


@contextlib.contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """``count`` CPU-bound processes for the duration of the block."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def run_round(files: list[Path], junit: Path) -> dict[str, tuple[str, float]]:
    """One run of ``files``: each test's outcome and seconds."""
    command = [sys.executable, "-m", "pytest", "-q", *map(str, files), f"--junitxml={junit}"]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if run.returncode != 0:  # keep why: the round's table only says that it failed
        print(run.stdout[-6000:], file=sys.stderr)
    return {name: (outcome, seconds) for name, outcome, seconds in junit_cases(junit)}


def summarize(rounds: list[dict[str, tuple[str, float]]]) -> list[dict]:
    """Per test: rounds passed of rounds run, median and slowest seconds, outcomes seen."""
    by_test: dict[str, list[tuple[str, float]]] = collections.defaultdict(list)
    for outcomes in rounds:
        for name, result in outcomes.items():
            by_test[name].append(result)
    rows = []
    for name, results in sorted(by_test.items()):
        seconds = [s for _, s in results]
        rows.append(
            {
                "test": name,
                "passed": f"{sum(o == 'passed' for o, _ in results)}/{len(results)}",
                "median s": f"{statistics.median(seconds):.1f}",
                "slowest s": f"{max(seconds):.1f}",
                "other outcomes": ", ".join(sorted({o for o, _ in results} - {"passed"})) or "-",
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--busy", type=int, default=os.cpu_count(), help="spinning processes")
    parser.add_argument("--files", nargs="*", type=Path, help="default: every process test file")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    files = args.files or process_test_files()
    load_start, rounds = load_average(), []
    with busy_cores(args.busy), tempfile.TemporaryDirectory() as folder:
        for index in range(args.rounds):
            rounds.append(run_round(files, Path(folder) / f"round{index}.xml"))
            failed = [name for name, (o, _) in rounds[-1].items() if o == "failed"]
            print(
                f"round {index + 1}/{args.rounds}: {len(failed)} failed {failed}", file=sys.stderr
            )
    rows = summarize(rounds)
    text = (
        f"{args.rounds} rounds of `python -m pytest -q` on {len(files)} files beside"
        f" {args.busy} spinning processes; load average {load_start:.2f} at the start,"
        f" {load_average():.2f} at the end.\n\n"
        + format_table(rows, ["test", "passed", "median s", "slowest s", "other outcomes"])
    )
    print(text)
    if not args.no_write:
        RESULTS_DIR.mkdir(exist_ok=True)
        (RESULTS_DIR / "process_tests_under_load.json").write_text(json.dumps(rows, indent=2))
        command = "python tools/process_tests_under_load.py " + " ".join(sys.argv[1:])
        update_section(SECTION, f"{SECTION}\n\nCommand: `{command.strip()}`\n\n{text}\n")
    return 1 if any(row["other outcomes"] not in ("-", "skipped") for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
