"""Metric writers and progress output: TensorBoard, metrics.jsonl, config.json.

Only process 0 writes, so multi-host runs produce one set of files.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import jax
import ml_collections


def is_main_process() -> bool:
    return jax.process_index() == 0


def save_config(config: ml_collections.ConfigDict, workdir: str | Path) -> None:
    """Writes config.json so a run (and its checkpoints) can be rebuilt from the workdir."""
    if not is_main_process():
        return
    path = Path(workdir) / "config.json"
    path.write_text(config.to_json_best_effort(indent=2, sort_keys=True) + "\n")


def load_config(workdir: str | Path) -> ml_collections.ConfigDict:
    path = Path(workdir) / "config.json"
    return ml_collections.ConfigDict(json.loads(path.read_text()))


class MetricWriter:
    """TensorBoard scalars (tensorboardX) plus a line-per-record metrics.jsonl."""

    def __init__(self, workdir: str | Path):
        self._enabled = is_main_process()
        self._jsonl = None
        self._tb = None
        if self._enabled:
            from tensorboardX import SummaryWriter

            Path(workdir).mkdir(parents=True, exist_ok=True)
            self._jsonl = open(Path(workdir) / "metrics.jsonl", "a")  # noqa: SIM115
            self._tb = SummaryWriter(str(Path(workdir) / "tensorboard"))

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


class Progress:
    """One line per report: step, loss, examples/s and ETA, to stderr."""

    def __init__(self, total_steps: int, batch_size: int, first_step: int = 0):
        self.total_steps = total_steps
        self.batch_size = batch_size
        self._last_step = first_step
        self._last_time = time.perf_counter()

    def report(self, step: int, loss: float) -> float:
        """Prints the line and returns examples/s since the previous report."""
        now = time.perf_counter()
        steps = max(step - self._last_step, 1)
        seconds = max(now - self._last_time, 1e-9)
        examples_per_s = steps * self.batch_size / seconds
        eta = (self.total_steps - step) * seconds / steps
        self._last_step, self._last_time = step, now
        parts = [
            f"step {step}/{self.total_steps}",
            f"loss {loss:.4f}",
            f"{examples_per_s:,.0f} ex/s",
            f"ETA {_format_seconds(eta)}",
        ]
        if is_main_process():
            print("  ".join(parts), file=sys.stderr, flush=True)
        return examples_per_s


def _format_seconds(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


_CHATTY_LIBRARIES = ("/orbax/", "/grain/", "/jax/", "/flax/", "/etils/")
# Orbax warns on every read-only restore that it will not create the folder.
_READ_ONLY_NOTICES = ("read_only=True", "directory is read only")


class _QuietFilter(logging.Filter):
    """Drops INFO from orbax, grain and jax, and orbax's read-only notices."""

    def filter(self, record: logging.LogRecord) -> bool:
        if any(notice in record.getMessage() for notice in _READ_ONLY_NOTICES):
            return False
        return record.levelno >= logging.WARNING or not any(
            lib in record.pathname for lib in _CHATTY_LIBRARIES
        )


def setup_logging(verbose: bool = False) -> None:
    """Warnings only, without library noise; ``verbose`` shows every INFO line.

    Progress lines and result tables are printed, not logged, so they show either way.
    """
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s")
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    for handler in root.handlers:
        for old in [f for f in handler.filters if isinstance(f, _QuietFilter)]:
            handler.removeFilter(old)
        if not verbose:
            handler.addFilter(_QuietFilter())
