"""What every bench measurement shares: alternating timed rounds, per-round ratios, the load
average around them, the machine's facts, and bench/RESULTS.md's sections.

A speed figure here is always a ratio of two things timed side by side in one
run, in rounds that alternate who goes first, so a change of load on this
shared machine falls on both; it is reported as the median of the per-round
ratios with their min, max and the load average before and after.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from capsim.tables import format_cells

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
RESULTS_MD = BENCH_DIR / "RESULTS.md"
SHARED_DATA = REPO.parent / "shared" / "data"
GOLDEN_FILE = SHARED_DATA / "golden" / "pycocoevalcap_flickr8k_expert.json"
ROUNDS = 5
HEADER = """# Benchmark results

Every table here is written by a script in `bench/` (or a tool in `tools/`); each
section names the command that produced it (bench/README.md lists them). Figures are measured on this repository's CPU
machine (2 cores) unless a section says otherwise.
"""


def time_rounds(
    runners: Mapping[str, Callable[[int], None]],
    rounds: int,
    *,
    before: Callable[[str], None] | None = None,
    after: Callable[[str], None] | None = None,
) -> dict[str, list]:
    """Seconds of each runner per round; ``runner(round_index)`` does one round's work.

    Rounds alternate the runners (who goes first swaps each round), so a change
    in machine load falls on both sides; ratios are taken per round.
    ``before(name)`` and ``after(name)`` run around each runner, off the clock.
    """
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    names = list(runners)
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            if before:
                before(name)
            began = time.perf_counter()
            runners[name](index)
            seconds[name].append(time.perf_counter() - began)
            if after:
                after(name)
    return seconds


def ratio_summary(ours: Sequence[float], reference: Sequence[float]) -> dict[str, float]:
    """Per-round speed ratios (reference seconds / our seconds): median, min and max."""
    ratios = np.asarray(reference) / np.asarray(ours)
    return {
        "ratio_median": float(np.median(ratios)),
        "ratio_min": float(ratios.min()),
        "ratio_max": float(ratios.max()),
    }


def ratio_cells(row: Mapping, spec: str = ".2f") -> list[str]:
    """A row's ratio median, min and max (``ratio_summary``'s keys) as table cells."""
    return [format(row[key], spec) for key in ("ratio_median", "ratio_min", "ratio_max")]


def ratio_spread(row: Mapping, spec: str = ".2f") -> str:
    """A row's ratio as one table cell: median (min-max)."""
    low, median, high = (format(row[k], spec) for k in ("ratio_min", "ratio_median", "ratio_max"))
    return f"{median} ({low}-{high})"


def spread_cell(values: Sequence[float], spec: str = ".2f") -> str:
    """Repeated timings as one table cell: median (min-max)."""
    low, median, high = min(values), float(np.median(values)), max(values)
    return f"{median:{spec}} ({low:{spec}}-{high:{spec}})"


def load_cell(row: Mapping) -> str:
    """The load average before and after a row's measurement, as one table cell."""
    return f"{row['load_start']:.2f} / {row['load_end']:.2f}"


def ratio_table(
    rows: Sequence[Mapping],
    unit: str,
    extra: Mapping[str, Callable[[Mapping], str]] | None = None,
) -> str:
    """Rows of ours against a reference timed side by side: each side's ``unit`` per second,
    the ratio's median, min and max, ``extra`` columns, and the load around the row."""
    extra = extra or {}
    columns = ["row", f"ours ({unit})", f"reference ({unit})", "ratio median", "min", "max"]
    return format_cells(
        [*columns, *extra, "load start / end"],
        [
            [
                r["name"],
                f"{r['ours']:.0f}",
                f"{r['reference']:.0f}",
                *ratio_cells(r),
                *(cell(r) for cell in extra.values()),
                load_cell(r),
            ]
            for r in rows
        ],
    )


def machine_facts() -> dict:
    """Cores, platform and library versions; torch's threads when a torch reference runs.
    JAX is imported here, not above, so that the metric benches run on the metrics install."""
    facts = {"cpu_cores": os.cpu_count(), "platform": platform.platform()}
    try:
        import jax
    except ImportError:
        facts["jax"] = None
    else:
        facts.update(jax=jax.__version__, jax_devices=jax.device_count())
    try:
        import torch  # the bench extra; the GPU check runs without it
    except ImportError:
        return facts
    facts.update(
        torch=torch.__version__,
        torch_threads=torch.get_num_threads(),
        omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", ""),
    )
    return facts


def load_average() -> float:
    """The 1-minute load average: read before and after a measurement, beside its ratio."""
    return os.getloadavg()[0]


def update_section(title: str, section: str) -> None:
    """Replaces the section headed ``title`` (a ``## `` line) with ``section``, or appends it."""
    text = RESULTS_MD.read_text() if RESULTS_MD.exists() else HEADER
    if title + "\n" in text:
        head, _, rest = text.partition(title + "\n")
        tail = rest.split("\n## ", 1)
        text = head + section + ("\n## " + tail[1] if len(tail) > 1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS_MD.write_text(text)


def script_path(script: str) -> str:
    """Where the bench or tool named ``script`` lives, from the clone's root, as its command
    names it (``bench/quality/meta_evaluation.py``)."""
    found = [*BENCH_DIR.glob(f"**/{script}.py"), *(REPO / "tools").glob(f"{script}.py")]
    if len(found) != 1:
        raise ValueError(f"{len(found)} scripts named {script}.py under bench/ and tools/")
    return found[0].relative_to(REPO).as_posix()


def record_results(script: str, rows: object, section: str, text: str, tag: str = "") -> None:
    """``rows`` as bench/results/<script>.json and ``text`` as the RESULTS.md ``section``,
    headed by the command line that made them (``python bench/<folder>/<script>.py ...``).
    A ``tag`` names a run of its own: <script>_<tag>.json and the section "<section>: <tag>"."""
    suffix, section = (f"_{tag}", f"{section}: {tag}") if tag else ("", section)
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"{script}{suffix}.json").write_text(json.dumps(rows, indent=2) + "\n")
    command = shlex.join(["python", script_path(script), *sys.argv[1:]])
    update_section(section, f"{section}\n\nCommand: `{command}`\n\n{text}\n")


def load_golden_pairs(path: Path, limit: int | None) -> tuple[dict, dict]:
    """pycocoevalcap-style gts/res from the first ``limit`` rows of the golden file."""
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"][:limit]
    gts = {row["key"]: list(row["references"]) for row in rows}
    res = {row["key"]: [row["candidate"]] for row in rows}
    return gts, res


def time_sweep(
    config: str | Path, workdir: Path, flags: Sequence[str], env: Mapping[str, str] | None = None
) -> float:
    """Wall seconds of a whole ``python -m launch.sweep`` command, as a user runs it (the
    grid benches); it must finish every job of the grid.

    Raises:
        subprocess.CalledProcessError: the command failed.
        RuntimeError: it ended with jobs unfinished.
    """
    command = [sys.executable, "-m", "launch.sweep", f"--config={config}", f"--workdir={workdir}"]
    began = time.perf_counter()
    subprocess.run([*command, *flags], check=True, cwd=REPO, capture_output=True, env=env)
    seconds = time.perf_counter() - began
    finished = len(list(workdir.glob("*/results.json")))
    if finished != len(list(workdir.glob("*/job.json"))):
        raise RuntimeError(f"{workdir}: only {finished} jobs finished")
    return seconds
