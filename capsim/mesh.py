"""Device mesh, shardings and global batches for data-parallel training.

One mesh axis, ``data``: batches are split across it and parameters are
replicated. The same code runs on one CPU, eight forced CPU devices, a GPU node
or a TPU pod slice; multi-host runs only add ``jax.distributed.initialize()``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

DATA_AXIS = "data"

# Seconds without a heartbeat after which jax.distributed declares a process dead
# and stops the others (jax's default is 100). This is the run's timeout for a
# peer that hangs or vanishes without closing its connections.
HEARTBEAT_ENV = "CAPSIM_HEARTBEAT_TIMEOUT_S"

# Environment variables that mean "this process is one of several".
_MULTI_PROCESS_HINTS = ("JAX_COORDINATOR_ADDRESS", "SLURM_NTASKS", "TPU_WORKER_HOSTNAMES")


def maybe_initialize_distributed() -> None:
    """Starts JAX's multi-host runtime when the launcher says there are several processes.

    On TPU pods and under SLURM ``jax.distributed.initialize()`` needs no
    arguments. For a hand-started run (e.g. two CPU processes on localhost), set
    JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID.
    CAPSIM_HEARTBEAT_TIMEOUT_S bounds how long survivors wait on a hung peer.
    """
    if jax.distributed.is_initialized():
        return
    if os.environ.get("SLURM_NTASKS", "1") == "1" and not any(
        os.environ.get(k) for k in _MULTI_PROCESS_HINTS if k != "SLURM_NTASKS"
    ):
        return
    kwargs = {}
    if "JAX_COORDINATOR_ADDRESS" in os.environ:
        kwargs = dict(
            coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
            num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
            process_id=int(os.environ["JAX_PROCESS_ID"]),
        )
    if HEARTBEAT_ENV in os.environ:
        kwargs["heartbeat_timeout_seconds"] = int(os.environ[HEARTBEAT_ENV])
    _keep_collectives_in_order()
    jax.distributed.initialize(**kwargs)
    _no_cached_programs_across_cpu_processes()
    logging.info(
        "jax.distributed: process %d of %d, %d global devices",
        jax.process_index(),
        jax.process_count(),
        jax.device_count(),
    )


# XLA's CPU scheduler may order a program's independent collectives differently in each
# process; gloo then fails ("Received data size doesn't match expected size"), as two
# processes of vmapped members did (tests/test_members.py). Off, every process keeps
# the program's order. Other backends ignore it.
_IN_ORDER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"


def _keep_collectives_in_order() -> None:
    """Adds _IN_ORDER_FLAG to XLA_FLAGS (before the backend starts) unless the user set it."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_enable_concurrency_optimized_scheduler" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {_IN_ORDER_FLAG}".strip()


def _no_cached_programs_across_cpu_processes() -> None:
    """Turns JAX's persistent compilation cache off for a run of several CPU processes.

    With JAX 0.12, two gloo processes that load their step from the cache (a rerun, a
    resumed run) wait forever in its first collective, while the same programs compiled
    afresh run (measured here: 2 processes on localhost, the cache hit hangs every time;
    tests/test_faults.py). A CPU step compiles in seconds, so nothing worth keeping is lost.
    """
    if jax.process_count() > 1 and jax.default_backend() == "cpu":
        jax.config.update("jax_enable_compilation_cache", False)


def make_data_mesh() -> Mesh:
    """A 1-D mesh over every device, with Auto axis types (Explicit breaks embedding gathers)."""
    return jax.make_mesh((jax.device_count(),), (DATA_AXIS,), axis_types=(AxisType.Auto,))


def data_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (batch) dimension split over the data axis."""
    return NamedSharding(mesh, P(DATA_AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def local_batch_size(global_batch_size: int) -> int:
    """This process's share of the global batch; the batch must split evenly over devices."""
    if global_batch_size % jax.device_count():
        raise ValueError(
            f"batch size {global_batch_size} does not divide over {jax.device_count()} devices"
        )
    return global_batch_size // jax.process_count()


def global_batch(local: Mapping[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
    """Assembles each process's slice of the batch into global, data-sharded arrays.

    The arrays go in one call: at batch 1,024 that places a batch 1.2-1.6x as fast as a
    call per array on CPU (bench/speed/step_levers.py, "placement"): host time that a GPU step
    of a few hundred microseconds would otherwise wait on.
    """
    return jax.make_array_from_process_local_data(data_sharding(mesh), dict(local))


def _is_key(x: jax.Array) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def replicate(tree, mesh: Mesh):
    """Places identical per-process values (same seed everywhere) as replicated global arrays.

    ``jax.device_put`` cannot target devices of other processes, so each process
    contributes its own copy through ``make_array_from_process_local_data``.
    PRNG key leaves travel as their raw key data.
    """
    sharding = replicated(mesh)

    def put(x):
        if _is_key(x):
            data = put(jax.random.key_data(x))
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
        return jax.make_array_from_process_local_data(sharding, np.asarray(x))

    return jax.tree.map(put, tree)


def to_local(tree):
    """This process's copy of replicated arrays, for host-side evaluation and scoring."""
    return jax.tree.map(lambda x: x.addressable_data(0), tree)
