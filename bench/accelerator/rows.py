"""bench/accelerator_check.py's rows: a time budget, and the JSON rewritten after every row.

A lent accelerator comes for a few minutes, start-up included, and a run stopped at
its limit keeps only what it has written. So every row is printed as it ends and the
whole result file is rewritten then (a temporary file renamed over it: a reader never
sees half a file), with ``"complete": false`` until the last row. Before a row starts,
``Recorder.row`` compares the time it is expected to take with what is left of its
section's share of the budget; a row that would not fit becomes a skipped row that
says so, instead of a run cut off in the middle of it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path

import jax
import numpy as np

from capsim.tables import format_cells


class Skipped(Exception):
    """A check that cannot run here; its row says why."""


@dataclasses.dataclass
class Budget:
    """``seconds`` for the whole run, counted from ``began`` (a ``time.perf_counter()``).

    ``estimates`` are a row's expected seconds by kind ("training", "demo", ...): the
    default until a row of that kind has run, then the longest such row measured.
    """

    seconds: float
    began: float
    estimates: dict[str, float]
    measured: dict[str, float] = dataclasses.field(default_factory=dict)

    def elapsed(self) -> float:
        return time.perf_counter() - self.began

    def estimate(self, kind: str) -> float:
        return self.measured.get(kind, self.estimates.get(kind, 0.0))

    def record(self, kind: str, seconds: float) -> None:
        self.measured[kind] = max(seconds, self.measured.get(kind, 0.0))

    def until(self, share: float) -> float:
        """The second of the run by which a section with this cumulative share must end."""
        return self.seconds * min(share, 1.0)

    def left(self, share: float = 1.0) -> float:
        """Seconds until the end of a section with this cumulative share."""
        return self.until(share) - self.elapsed()

    def refusal(self, kind: str, share: float = 1.0) -> str | None:
        """Why a ``kind`` row may not start now in a section ending at ``share``, else None."""
        elapsed, needed, until = self.elapsed(), self.estimate(kind), self.until(share)
        if elapsed + needed <= until:
            return None
        return (
            f"time budget: {elapsed:.0f} s spent, about {needed:.0f} s needed, and this "
            f"section ends at {until:.0f} s of --budget_s {self.seconds:.0f}"
        )


def agreed(value: bool) -> bool:
    """Process 0's ``value`` on every process, so that all of them run the same rows (their
    steps are collectives); the value itself on one process."""
    if jax.process_count() == 1:
        return value
    from jax.experimental import multihost_utils

    return bool(multihost_utils.broadcast_one_to_all(np.int32(value)))


def write_atomically(path: Path, text: str) -> None:
    """``text`` into ``path`` by renaming a finished temporary file over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def row_line(row: Mapping) -> str:
    """One printed line of a row as it ends."""
    parts = [f"[accelerator_check] {row['check']} ({row['dtype']}"]
    if row.get("batch"):
        parts.append(f", batch {row['batch']:,}")
    parts.append(f"): {row['status']}")
    if row.get("throughput") is not None:
        parts.append(f", {row['throughput']:,.0f} {row.get('unit', '')}")
    if row.get("mfu") is not None:
        parts.append(f", MFU {row['mfu']:.2%}")
    if row.get("ratio_median") is not None:
        parts.append(f", {row.get('ratio_of', 'JAX/PyTorch')} {row['ratio_median']:.2f}x")
    parts.append(f" ({row.get('seconds', 0.0):.1f} s)")
    quiet = row["status"] == "ok" and row.get("throughput") is not None  # its note: sizes
    note = row.get("error") or ("" if quiet else row.get("note", ""))
    return "".join(parts) + (f": {note}" if note else "")


def _cell(row: Mapping, key: str, spec: str) -> str:
    value = row.get(key)
    return "" if value is None else format(value, spec)


def rows_table(rows: list[dict]) -> str:
    """One line per row of the check, as printed and kept in the JSON's summary."""
    return format_cells(
        [
            "check",
            "dtype",
            "batch",
            "status",
            "throughput",
            "unit",
            "step ms",
            "TFLOP/s",
            "MFU",
            "JAX/PyTorch",
            "note",
        ],
        [
            [
                row["check"],
                row["dtype"],
                _cell(row, "batch", ","),
                row["status"],
                _cell(row, "throughput", ",.0f"),
                row.get("unit", ""),
                _cell(row, "step_ms", ".2f"),
                _cell(row, "tflops", ".3g"),
                _cell(row, "mfu", ".2%"),
                _cell(row, "ratio_median", ".2f"),
                row.get("error") or row.get("note", ""),
            ]
            for row in rows
        ],
    )


class Recorder:
    """The run's rows: each printed when it ends, and ``out`` rewritten with all of them.

    ``result`` is the file's header (device, peaks, ...); its ``rows`` grow row by
    row. Only process 0 writes (``write``).
    """

    def __init__(self, out: Path, result: dict, budget: Budget, write: bool = True):
        self.out, self.result, self.budget, self.writes = out, result, budget, write
        self.result.update(rows=[], complete=False, budget_s=budget.seconds)
        self.rows: list[dict] = self.result["rows"]
        self.flush()

    def flush(self) -> None:
        self.result["seconds"] = self.budget.elapsed()
        if self.writes:
            write_atomically(self.out, json.dumps(self.result, indent=2) + "\n")

    def add(self, row: dict) -> dict:
        self.rows.append(row)
        print(row_line(row), flush=True)
        self.flush()
        return row

    def skip(self, check: str, dtype: str, reason: str, **fields) -> dict:
        row = {"check": check, "dtype": dtype, **fields, "status": "skipped", "seconds": 0.0}
        return self.add({**row, "note": reason})

    def row(
        self,
        check: str,
        dtype: str,
        measure: Callable[[], dict],
        *,
        kind: str,
        share: float = 1.0,
        **fields,
    ) -> dict:
        """Runs ``measure`` as one row, if a ``kind`` row fits before ``share`` of the budget.

        The row holds ``fields`` (e.g. batch) and what ``measure`` returns; a
        ``Skipped`` raised in it, or any error, becomes a skipped or failed row.
        """
        reason = self.budget.refusal(kind, share)
        if not agreed(reason is None):
            return self.skip(check, dtype, reason or "time budget (process 0's)", **fields)
        began = time.perf_counter()
        try:
            row = {"status": "ok", **measure()}
        except Skipped as why:
            row = {"status": "skipped", "note": str(why)}
        except Exception as error:  # a failed check must not hide the others
            traceback.print_exc()
            row = {"status": "failed", "error": f"{type(error).__name__}: {error}"}
        seconds = time.perf_counter() - began
        if row["status"] != "skipped":
            self.budget.record(kind, seconds)
        return self.add({"check": check, "dtype": dtype, **fields, **row, "seconds": seconds})

    def finish(self) -> None:
        self.result["complete"] = True
        self.flush()
