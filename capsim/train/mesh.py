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

# Environment variables that mean "this process is one of several".
_MULTI_PROCESS_HINTS = ("JAX_COORDINATOR_ADDRESS", "SLURM_NTASKS", "TPU_WORKER_HOSTNAMES")


def maybe_initialize_distributed() -> None:
    """Starts JAX's multi-host runtime when the launcher says there are several processes.

    On TPU pods and under SLURM ``jax.distributed.initialize()`` needs no
    arguments. For a hand-started run (e.g. two CPU processes on localhost), set
    JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID.
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
    jax.distributed.initialize(**kwargs)
    logging.info(
        "jax.distributed: process %d of %d, %d global devices",
        jax.process_index(),
        jax.process_count(),
        jax.device_count(),
    )


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
    """Assembles each process's slice of the batch into one global, data-sharded array."""
    sharding = data_sharding(mesh)
    return {k: jax.make_array_from_process_local_data(sharding, v) for k, v in local.items()}
