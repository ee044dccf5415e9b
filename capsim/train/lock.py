"""One live run per workdir: an advisory lock that dies with its process.

Two runs training into one folder would interleave metrics.jsonl and collide
on checkpoint steps. ``fcntl.flock`` locks are released by the kernel when the
holder exits, however it exits, so a SIGKILLed run leaves nothing stale behind
and the same command resumes. In a multi-process run process 0 holds it (the
others may share the folder over a network file system).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import jax

from capsim.errors import CapsimError
from capsim.workdir import LOCK_FILE


class WorkdirBusyError(CapsimError):
    """Another live run holds the workdir."""


def _holder(path: Path) -> str:
    text = path.read_text().strip() if path.exists() else ""
    return text or "an unknown process"


@contextlib.contextmanager
def hold_workdir(workdir: str | Path) -> Iterator[None]:
    """Holds ``workdir`` for the duration of the block; refuses if a live run holds it.

    The error names the holder's host and pid, as the holder wrote them.
    """
    if jax.process_index() != 0:
        yield
        return
    path = Path(workdir) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise WorkdirBusyError(
                f"workdir {workdir} is in use by a live run ({_holder(path)}); wait for it "
                "to finish or stop it, or use another --workdir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"host {socket.gethostname()} pid {os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # releases the lock


def check_workdir_free(workdir: str | Path) -> None:
    """Refuses early, before any data is read, when a live run holds ``workdir``."""
    with hold_workdir(workdir):
        pass
