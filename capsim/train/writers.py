"""Metric writers and progress output: TensorBoard, metrics.jsonl, config.json.

Only process 0 writes, so multi-host runs produce one set of files.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import jax
import ml_collections

from capsim.errors import CapsimError, DataFormatError
from capsim.train.lock import check_workdir_free


def is_main_process() -> bool:
    return jax.process_index() == 0


def save_config(config: ml_collections.ConfigDict, workdir: str | Path) -> None:
    """Writes config.json so a run (and its checkpoints) can be rebuilt from the workdir."""
    if not is_main_process():
        return
    path = Path(workdir) / "config.json"
    path.write_text(config.to_json_best_effort(indent=2, sort_keys=True) + "\n")


# Config subtrees that shape the model or its vocabulary. The data may move and
# the compute dtype may change (parameters are float32 either way).
MODEL_DEFINING = ("model", "data")
MOVABLE_KEYS = ("data.data_dir", "model.dtype")


def _flat(tree: object, prefix: str = "") -> dict[str, object]:
    if isinstance(tree, dict):
        flat: dict[str, object] = {}
        for key, value in tree.items():
            flat.update(_flat(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: tree}


def _model_defining(config: dict) -> dict[str, object]:
    """The dotted keys of a config dict that shape the model or its vocabulary."""
    flat = {}
    for part in MODEL_DEFINING:
        flat.update(_flat(config.get(part, {}), f"{part}."))
    return {k: v for k, v in flat.items() if k not in MOVABLE_KEYS}


def check_workdir(config: ml_collections.ConfigDict, workdir: str | Path) -> Path:
    """Creates ``workdir`` and checks, before any work, that a run can use it.

    Errors (CapsimError naming the folder or the keys): a workdir that cannot be
    written; one a live run holds (capsim.train.lock); a ``config.json`` there from a run whose model or data keys differ
    from this config's (resuming would mix two models), unless the config sets
    ``allow_config_change`` (``--config.allow_config_change=True``).
    """
    workdir = Path(workdir)
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=workdir, prefix=".write_test"):
            pass  # a name of its own per process: hosts sharing the workdir do not collide
    except OSError as error:
        raise CapsimError(f"workdir {workdir} is not writable ({error.strerror})") from error
    check_workdir_free(workdir)  # a live run there: refused before any data is read
    saved_file = workdir / "config.json"
    if saved_file.exists() and not config.get("allow_config_change", False):
        saved = _model_defining(json.loads(saved_file.read_text()))
        current = _model_defining(json.loads(config.to_json_best_effort()))
        changed = sorted(k for k in saved.keys() | current.keys() if saved.get(k) != current.get(k))
        if changed:
            raise CapsimError(
                f"{saved_file} is from a run with other settings for {changed}: resuming would mix "
                "two models. Use another workdir, or pass --config.allow_config_change=True"
            )
    return workdir


def load_config(workdir: str | Path) -> ml_collections.ConfigDict:
    path = Path(workdir) / "config.json"
    return ml_collections.ConfigDict(json.loads(path.read_text()))


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
            metrics = Path(workdir) / "metrics.jsonl"
            dropped = _drop_rows_after(metrics, resume_step)
            if dropped:
                logging.getLogger(__name__).warning(
                    "%s: dropped %d rows logged after step %d by the interrupted run",
                    metrics,
                    dropped,
                    resume_step,
                )
            self._jsonl = open(metrics, "a")  # noqa: SIM115
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
    """One line per report on stderr: done/total, named numbers, rate and ETA.

    Training: ``Progress(num_steps, per_unit=batch_size)`` prints
    ``step 50/2462  loss 51.6211  155 ex/s  ETA 0:33:16``. Other long loops set
    ``unit``/``item`` (``Progress(n, unit="images", item="images", prefix=...)``)
    and ``min_interval_s`` to report at most that often.
    """

    def __init__(
        self,
        total: int,
        *,
        per_unit: int = 1,
        first: int = 0,
        unit: str = "step",
        item: str = "ex",
        prefix: str = "",
        min_interval_s: float = 0.0,
    ):
        self.total, self.per_unit, self.unit, self.item = total, per_unit, unit, item
        self.prefix, self.min_interval_s = prefix, min_interval_s
        self._last_done = first
        self._last_time = time.perf_counter()

    def report(
        self, done: int, final: bool = False, input_wait_s: float | None = None, **numbers: float
    ) -> float | None:
        """Prints the line; returns items/s since the previous line (None when throttled).

        ``input_wait_s``: seconds of that interval spent waiting for input, shown as
        a share (``input 3%``), so a slow input pipeline shows itself.
        """
        now = time.perf_counter()
        seconds = max(now - self._last_time, 1e-9)
        if not final and seconds < self.min_interval_s:
            return None
        count = max(done - self._last_done, 1)
        items_per_s = count * self.per_unit / seconds
        eta = (self.total - done) * seconds / count
        self._last_done, self._last_time = done, now
        parts = [f"{self.prefix}{self.unit} {done}/{self.total}"]
        parts += [f"{name} {value:.4f}" for name, value in numbers.items()]
        if input_wait_s is not None:
            parts.append(f"input {100 * input_wait_s / seconds:.0f}%")
        parts += [f"{items_per_s:,.1f} {self.item}/s", f"ETA {_format_seconds(eta)}"]
        if is_main_process():
            print("  ".join(parts), file=sys.stderr, flush=True)
        return items_per_s


def _format_seconds(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


_CHATTY_LIBRARIES = ("/orbax/", "/grain/", "/jax/", "/flax/", "/etils/")
# Orbax warns on every read-only restore that it will not create the folder,
# and on every save without an evaluation that no metrics came with it.
_ROUTINE_ORBAX_NOTICES = ("read_only=True", "directory is read only", "did not provide metrics")


class _QuietFilter(logging.Filter):
    """Drops INFO from orbax, grain and jax, and orbax's routine notices."""

    def filter(self, record: logging.LogRecord) -> bool:
        if any(notice in record.getMessage() for notice in _ROUTINE_ORBAX_NOTICES):
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
