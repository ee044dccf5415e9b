"""A jax.profiler trace of chosen training steps (``config.profile_steps="A:B"``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import jax


class StepTrace:
    """Traces steps A+1 .. B of ``"A:B"`` into ``folder`` ("" traces nothing).

    TensorBoard or Perfetto opens the trace.
    """

    def __init__(self, spec: str, folder: Path):
        self.window = _steps(spec)
        self.folder = folder

    def before_step(self, done: int) -> None:
        """Starts the profiler before step A+1 (``done``: steps trained so far)."""
        if self.window and done == self.window[0]:
            jax.profiler.start_trace(str(self.folder))

    def after_step(self, done: int, outputs: Any) -> None:
        """Stops it once step B has run (``outputs`` waited for, so the trace holds it)."""
        if self.window and done == self.window[1]:
            jax.block_until_ready(outputs)
            jax.profiler.stop_trace()
            logging.warning(
                "profiler trace of steps %d-%d in %s (TensorBoard or Perfetto opens it)",
                self.window[0] + 1,
                self.window[1],
                self.folder,
            )


def _steps(spec: str) -> tuple[int, int] | None:
    """``"A:B"`` -> (A, B); "" -> None."""
    if not spec:
        return None
    try:
        start, stop = (int(part) for part in spec.split(":"))
    except ValueError:
        raise ValueError(
            f"profile_steps={spec!r}: expected 'A:B' with A < B, e.g. '10:20'"
        ) from None
    if not 0 <= start < stop:
        raise ValueError(f"profile_steps={spec!r}: expected 'A:B' with 0 <= A < B")
    return start, stop
