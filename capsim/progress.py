"""The progress line on stderr: done/total, named numbers, rate, input-wait share, ETA."""

from __future__ import annotations

import sys
import time

from capsim.workdir import is_main_process


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
