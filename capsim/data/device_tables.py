"""Device tables: indices on the host, rows on the device.

A model's batches may index large arrays, such as VTFN's image features
([images, 2048] float32: 8 MB of rows per batch of 1,024). ``Batches.tables``
names them (``{"features": matrix}``) and ``make_batch`` then emits small
index arrays in their place: ``"features_rows"``, int32 rows of the table.
``gather_tables`` turns those back into rows, the one place it is done, either

- on the host, in grain's map (``Batches.batch_fn(tables_on_device=False)``), as
  batches were always built; or
- on the device, inside the jit-compiled train step, from tables placed once,
  replicated over the mesh (capsim.train.trainer): only the indices travel each
  step, and the gather fuses with the step.

Either way the loss sees the same batch, bit for bit; grain, the batch order,
the draws, the process shards and the checkpointed iterator state are the same
(the host builds the same index arrays). Tables are data, not state: never in a
checkpoint.

Which path a run takes is ``config.device_tables``: "auto" (the default), "on"
or "off" (True and False too). ``choose_path`` decides once, before training, and
says why: "auto" puts the tables on the device when they fit in ``DEVICE_SHARE``
of its free memory (``jax.Device.memory_stats``; on CPU, where the device is the
host, of the host's available memory, once per local device since each holds a
copy; a host that does not say counts as room), else keeps them on the host. "on"
that does not fit is an error before training (DeviceTablesError), never an
out-of-memory error in the middle of a run.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from capsim.errors import CapsimError

ROWS_SUFFIX = "_rows"
# At most this share of a device's free memory goes to tables under "auto": the rest
# is for the step's activations, its gradients and the batches in flight.
DEVICE_SHARE = 0.5
SETTINGS = {
    "auto": None,
    "on": True,
    "true": True,
    "yes": True,
    "1": True,
    "off": False,
    "false": False,
    "no": False,
    "0": False,
}
NO_TABLES = "the batches index no tables"


class DeviceTablesError(CapsimError):
    """``config.device_tables`` cannot be honoured (a bad value, or tables too large)."""


def rows_key(name: str) -> str:
    """The batch key that carries rows of table ``name`` (``features`` -> ``features_rows``)."""
    return name + ROWS_SUFFIX


def _take(table: Any, rows: Any) -> Any:
    if isinstance(table, jax.Array):  # a placed table, or its tracer inside the step
        return jnp.take(table, rows, axis=0, mode="clip")  # rows are in range by construction
    return np.asarray(table[np.asarray(rows)])  # NumPy, or a store read by rows (ArrayRecord)


def gather_tables(tables: Mapping[str, Any], batch: Mapping[str, Any]) -> dict[str, Any]:
    """``batch`` with each ``K_rows`` whose ``K`` is a table replaced by ``K``: those rows
    of ``tables[K]``, in ``K_rows``'s place. Other keys pass as they are.

    With NumPy tables (or any store indexed by rows) on the host, with placed tables
    (jax arrays) inside the jit-compiled step: the same rows either way."""
    gathered = {}
    for key, value in batch.items():
        name = key[: -len(ROWS_SUFFIX)] if key.endswith(ROWS_SUFFIX) else None
        if name is not None and name in tables:
            gathered[name] = _take(tables[name], value)
        else:
            gathered[key] = value
    return gathered


def table_bytes(tables: Mapping[str, Any]) -> int:
    """Bytes the tables take on a device (float64 arrives as float32 without x64)."""
    total = 0
    for table in tables.values():
        dtype = jax.dtypes.canonicalize_dtype(np.dtype(table.dtype))
        total += int(np.prod(table.shape)) * np.dtype(dtype).itemsize
    return total


def host_available_bytes() -> int | None:
    """Memory the host can still give (Linux MemAvailable, else free pages), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _memory_stats(device: jax.Device) -> dict | None:
    try:
        return device.memory_stats()
    except Exception:  # a backend without the query (jax raises several types)
        return None


def free_memory(devices: Sequence[jax.Device]) -> tuple[int | None, int, str]:
    """(free bytes, copies of the tables that come out of them, what that memory is).

    An accelerator reports its limit and use (``memory_stats``): each device holds its
    own copy, so the tightest device counts once. A CPU device reports none: the
    devices are the host, and every local device's copy comes out of its memory.
    """
    stats = [_memory_stats(device) for device in devices]
    if all(s and "bytes_limit" in s for s in stats):
        free = min(s["bytes_limit"] - s.get("bytes_in_use", 0) for s in stats)
        return free, 1, f"{devices[0].device_kind} memory"
    if all(device.platform == "cpu" for device in devices):
        return host_available_bytes(), len(devices), "host memory (the CPU devices)"
    # An accelerator that does not say: "auto" keeps the tables on the host.
    return None, 1, f"{devices[0].device_kind} memory (not reported)"


def parse_setting(value: object) -> bool | None:
    """``config.device_tables`` as True (on), False (off) or None (auto)."""
    if isinstance(value, bool):
        return value
    key = str(value).strip().lower()
    if key not in SETTINGS:
        raise DeviceTablesError(
            f"config.device_tables={value!r}: use 'auto' (the default), 'on' or 'off'"
        )
    return SETTINGS[key]


@dataclasses.dataclass(frozen=True)
class InputPath:
    """Where a run's table rows are gathered, and why (logged once, in results.json)."""

    on_device: bool
    reason: str
    fell_back: bool = False  # "auto" kept them on the host for lack of memory

    @property
    def name(self) -> str:
        """What results.json says ("device tables", "host gather", "no tables"): the
        reason, with its free memory, changes from run to run and is logged instead."""
        if self.on_device:
            return "device tables"
        return "no tables" if self.reason == NO_TABLES else "host gather"

    def summary(self) -> str:
        return f"{self.name}: {self.reason}"


def size_text(count: float) -> str:
    """Bytes as people read them: ``4.2 MB``, ``1.0 GB``, ``512 B``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count:.0f} B"


def _describe(tables: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{name} {tuple(table.shape)} {table.dtype} {size_text(table_bytes({name: table}))}"
        for name, table in tables.items()
    )


def choose_path(
    setting: object, tables: Mapping[str, Any], devices: Sequence[jax.Device]
) -> InputPath:
    """Where ``tables`` go for a run on ``devices`` (this process's), under ``setting``.

    Raises DeviceTablesError for "on" with tables that are not in-memory arrays or
    that do not fit in ``DEVICE_SHARE`` of the devices' free memory (naming sizes);
    "auto" falls back to the host in those cases and says why.
    """
    forced = parse_setting(setting)
    if not tables:
        return InputPath(False, NO_TABLES)
    if forced is False:
        return InputPath(False, "config.device_tables=off")
    what = _describe(tables)
    stores = sorted(name for name, t in tables.items() if not isinstance(t, np.ndarray))
    if stores:
        reason = f"{stores} are read from a store, not held in memory"
        if forced:
            raise DeviceTablesError(f"config.device_tables=on, but {reason}")
        return InputPath(False, reason)
    size = table_bytes(tables)
    free, copies, memory = free_memory(devices)
    if free is None:  # a CPU's tables are in host memory either way; an accelerator's may not fit
        if forced or all(device.platform == "cpu" for device in devices):
            return InputPath(True, f"{'config.device_tables=on; ' if forced else ''}{what}")
        return InputPath(False, f"{what}; free {memory}: kept on the host")
    needed, budget = size * copies, DEVICE_SHARE * free
    facts = (
        f"{what}{f' x {copies} devices' if copies > 1 else ''} = {size_text(needed)}; "
        f"free {memory} {size_text(free)}"
    )
    if needed <= budget:
        return InputPath(True, f"{'config.device_tables=on; ' if forced else ''}{facts}")
    if forced:
        raise DeviceTablesError(
            f"config.device_tables=on: the tables need {size_text(needed)} ({what}"
            f"{f', a copy on each of {copies} devices' if copies > 1 else ''}) but "
            f"{DEVICE_SHARE:.0%} of the free {memory} is {size_text(budget)} "
            f"(free {size_text(free)}); use config.device_tables=auto or off to gather "
            "rows on the host"
        )
    return InputPath(
        False, f"{facts}: over {DEVICE_SHARE:.0%} of it, so rows are gathered on the host", True
    )


def agreed(path: InputPath, tables: Mapping[str, Any]) -> InputPath:
    """The path every process takes: the device only where every process's tables fit.

    Each process decides on its own devices, but the batches they assemble must carry
    the same keys; with several processes (and tables, the same on each) they vote once.
    """
    if jax.process_count() == 1 or not tables:
        return path
    from jax.experimental import multihost_utils

    votes = multihost_utils.process_allgather(np.int32(path.on_device))
    if not path.on_device or bool(np.all(votes)):
        return path
    return InputPath(False, f"{path.reason}; another process lacks the room", True)


def log_path(path: InputPath) -> None:
    """Says once which path a run takes; a fallback for lack of memory is a warning."""
    (logging.warning if path.fell_back else logging.info)("input: %s", path.summary())
