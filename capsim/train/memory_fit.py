"""Whether a compiled program fits beside what the device already holds: the sizes a
pack of vmapped members (capsim.train.members) checks before its first step."""

from __future__ import annotations

import os
from typing import Any

import jax

from capsim.errors import CapsimError

# What a program allocates over what XLA's memory analysis says: on CPU, 4 paper-size
# I2CE members analysed at 1.49 GB beside their arguments grew the process by 2.2 GB.
MEMORY_MARGIN = 1.5


class MemoryFitError(CapsimError):
    """The members asked for do not fit in the device's memory; ``fits``: how many would."""

    def __init__(self, message: str, fits: int):
        super().__init__(message)
        self.fits = fits


def tree_bytes(tree: Any) -> int:
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree) if hasattr(x, "dtype"))


def program_bytes(compiled: jax.stages.Compiled) -> tuple[int, int]:
    """(its arguments' bytes, the bytes it allocates beside them: outputs not aliased to
    arguments, and temporaries), from XLA's memory analysis; (0, 0) when there is none."""
    analysis = compiled.memory_analysis()
    if analysis is None:
        return 0, 0
    allocated = (
        analysis.output_size_in_bytes - analysis.alias_size_in_bytes + analysis.temp_size_in_bytes
    )
    return int(analysis.argument_size_in_bytes), int(allocated)


def free_device_bytes(device: jax.Device) -> int | None:
    """Bytes the device can still allocate: its allocator's limit less what is in use
    (accelerators), the host's available memory (CPU); None when unknown."""
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"] - stats.get("bytes_in_use", 0))
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def mib(count: int) -> str:
    return f"{count / 2**20:,.1f} MiB"
