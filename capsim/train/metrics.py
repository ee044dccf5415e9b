"""metrics.jsonl and TensorBoard scalars, one row per logged step (process 0 writes)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from capsim.errors import DataFormatError
from capsim.workdir import METRICS_FILE, TENSORBOARD_DIR, is_main_process


def _row_step(path: Path, number: int, line: str) -> int:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError) as error:
        raise DataFormatError(path, f"not a metrics row ({error})", number) from error


def _drop_rows_after(path: Path, step: int) -> int:
    """Rewrites metrics.jsonl without the rows past ``step`` (atomically); returns how many.

    A run killed between a log line and its next checkpoint resumes from that
    checkpoint and logs those steps again; dropping them keeps one row per step.
    A last row without its newline was cut short by the kill and goes too.
    """
    if not path.exists():
        return 0
    lines = path.read_text().splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] = ""  # a row cut short by a kill mid-write; its step is logged again
    kept = [
        line for n, line in enumerate(lines, 1) if line.strip() and _row_step(path, n, line) <= step
    ]
    if len(kept) < len(lines):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(kept))
        tmp.replace(path)
    return len(lines) - len(kept)


def logged_values(workdir: str | Path, key: str) -> list[float]:
    """Every value of ``key`` in the run's metrics.jsonl, in step order ([] without the file)."""
    path = Path(workdir) / METRICS_FILE
    if not path.exists():
        return []
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return [row[key] for row in rows if key in row]


class MetricWriter:
    """TensorBoard scalars (tensorboardX) plus a line-per-record metrics.jsonl.

    ``resume_step``: the step a resumed run restarts from; rows logged past it
    by the interrupted run are dropped, so every step is logged once.
    """

    def __init__(self, workdir: str | Path, resume_step: int = 0):
        self._enabled = is_main_process()
        self._jsonl = None
        self._tb = None
        if self._enabled:
            from tensorboardX import SummaryWriter

            Path(workdir).mkdir(parents=True, exist_ok=True)
            metrics = Path(workdir) / METRICS_FILE
            dropped = _drop_rows_after(metrics, resume_step)
            if dropped:
                logging.getLogger(__name__).warning(
                    "%s: dropped %d rows logged after step %d by the interrupted run",
                    metrics,
                    dropped,
                    resume_step,
                )
            self._jsonl = open(metrics, "a")  # noqa: SIM115
            self._tb = SummaryWriter(str(Path(workdir) / TENSORBOARD_DIR))

    def write(self, step: int, scalars: Mapping[str, float]) -> None:
        if not self._enabled:
            return
        record = {"step": int(step), **{k: float(v) for k, v in scalars.items()}}
        self._jsonl.write(json.dumps(record) + "\n")
        self._jsonl.flush()
        for name, value in scalars.items():
            self._tb.add_scalar(name, float(value), int(step))
        self._tb.flush()

    def close(self) -> None:
        if self._enabled:
            self._jsonl.close()
            self._tb.close()
