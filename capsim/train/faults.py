"""What the trainer does when a run is interrupted: preemption, a lost peer, any other error.

- **Preemption** (SIGTERM: the notice TPU VMs and clusters send) saves a
  checkpoint and exits 0, so the same command resumes. With several processes
  the save is collective, so every process must stop at the same step whichever
  host got the signal: jax.distributed's preemption service catches SIGTERM and
  the processes agree on a step (orbax's ``CheckpointManager.reached_preemption``).
  One process has no such service; a SIGTERM handler sets a flag instead.
- **A lost peer** (SIGKILL, a dead host) breaks the next collective. The
  survivors exit PEER_FAILURE_EXIT_CODE at once, since rerunning resumes.
- **Any other error** in a multi-process run (a bad shape, out of memory)
  prints its traceback and exits 1: rerunning would fail again, and raising
  would leave jax's shutdown barrier waiting for peers stuck in a collective.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator

import jax

# Exit status of a process that stops because a peer process died.
PEER_FAILURE_EXIT_CODE = 75  # EX_TEMPFAIL: rerunning the same command resumes

# Error text (lower-cased) that means a peer or a collective's transport was lost:
# gloo and NCCL transport errors and the coordination service's, as seen when a
# peer of a 2-process gloo run is SIGKILLed ("Gloo all-reduce failed ... Connection
# reset by peer"; "UNAVAILABLE: Failed to send RPC to coordination service").
_PEER_LOST_MARKERS = (
    "gloo",
    "nccl",
    "connection reset",
    "connection closed",
    "connection refused",
    "socket closed",
    "broken pipe",
    "coordination service",
    "heartbeat",
    "unavailable:",
)


def peer_was_lost(error: BaseException) -> bool:
    """Whether ``error`` says that another process or a collective's link was lost.

    Read from the message, whatever the type: the step's all-reduce raises
    JaxRuntimeError, but orbax's barriers (multihost_utils) raise ValueError.
    """
    text = str(error).lower()
    return any(marker in text for marker in _PEER_LOST_MARKERS)


class Preemption:
    """Whether the run should save and stop at ``step``, the same answer on every process."""

    def __init__(self, reached_agreed_preemption: Callable[[int], bool]):
        self._agreed = reached_agreed_preemption if jax.process_count() > 1 else None
        self._signalled = False
        self._previous = None
        # Several processes: SIGTERM belongs to jax's preemption service. Signals
        # can only be caught on the main thread; elsewhere a single process has none.
        if self._agreed is None and threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: object) -> None:
        self._signalled = True

    def reached(self, step: int) -> bool:
        """Called at every step by every process (the agreement needs each step)."""
        if self._agreed is not None:
            return self._agreed(step)
        return self._signalled

    def close(self) -> None:
        """Gives SIGTERM back to whoever handled it before the run."""
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


@contextlib.contextmanager
def exit_on_failure(describe_checkpoint: Callable[[], str]) -> Iterator[None]:
    """In a multi-process run, turns an error into an exit status that says what to do.

    ``describe_checkpoint()`` names the last checkpoint, for the rerun message.
    A single process raises as usual.
    """
    try:
        yield
    except Exception as error:
        if jax.process_count() == 1:
            raise
        who = f"process {jax.process_index()} of {jax.process_count()}"
        if peer_was_lost(error):
            print(
                f"{who}: a collective failed ({str(error).splitlines()[0]}); another process "
                f"of this run most likely died. Rerun the same command on every host to resume "
                f"from {describe_checkpoint()}",
                file=sys.stderr,
                flush=True,
            )
            os._exit(PEER_FAILURE_EXIT_CODE)
        traceback.print_exc()
        print(
            f"{who}: stopped by the error above ({type(error).__name__}), which is not a lost "
            "peer: rerunning would fail again",
            file=sys.stderr,
            flush=True,
        )
        os._exit(1)
