"""grain input pipelines: shuffled, per-epoch reseeded, sharded by process, gathered by batch.

A batch is built in one call from an array of example indices (NumPy fancy
indexing over the encoded corpus and the feature matrix), not example by
example: per-example Python maps cap the pipeline near the speed of a BOW
training step (bench/throughput.py measures both).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import grain
import jax
import numpy as np
from absl import flags

from capsim.train.mesh import local_batch_size

Batch = dict[str, np.ndarray]
MakeBatch = Callable[[np.ndarray, np.ndarray], Batch]

_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)


def uniform_draws(seed: int, positions: np.ndarray) -> np.ndarray:
    """Numbers in [0, 1), one per position, that depend only on ``(seed, position)``.

    splitmix64, vectorised: a batch's random choices come from where its
    examples sit in the run, so they are the same whatever the number of
    processes or workers, and a resumed run draws what an uninterrupted one did.
    """
    with np.errstate(over="ignore"):
        z = np.asarray(positions, np.uint64) * _GOLDEN_GAMMA + np.uint64(seed) * np.uint64(
            0xD1B54A32D192ED03
        )
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def _local_batch(
    index: int, rows: np.ndarray, *, make_batch: MakeBatch, seed: int, first: int, size: int
) -> Batch:
    positions = index * len(rows) + np.arange(first, first + size)
    return make_batch(rows[first : first + size], uniform_draws(seed, positions))


def training_dataset(
    num_examples: int,
    make_batch: MakeBatch,
    *,
    global_batch_size: int,
    seed: int,
    num_epochs: int | None = None,
    workers: int = 0,
) -> grain.IterDataset:
    """Batches of examples ``0..num_examples-1`` in a new random order each epoch.

    ``make_batch(rows, draws)`` gathers this process's share of one global batch:
    ``rows`` are example indices [local batch] and ``draws`` one number in [0, 1)
    per example for its random choices (see ``uniform_draws``). Process p takes
    the p-th contiguous block of each global batch, so the global batch, in
    order, is the same for any number of processes. ``workers`` > 0 builds
    batches in that many grain worker processes, with the same batches in the
    same order; the iterator state (saved in checkpoints) resumes exactly.
    """
    local = local_batch_size(global_batch_size)
    dataset = grain.MapDataset.range(num_examples).seed(seed).shuffle().repeat(num_epochs)
    dataset = dataset.batch(global_batch_size, drop_remainder=True)
    # Bound here, not in the workers: they do not run jax.distributed.
    first = jax.process_index() * local
    dataset = dataset.map_with_index(
        functools.partial(_local_batch, make_batch=make_batch, seed=seed, first=first, size=local)
    )
    if not workers:
        return dataset.to_iter_dataset()
    if not flags.FLAGS.is_parsed():  # grain's workers read absl flags; scripts may not parse them
        flags.FLAGS.mark_as_parsed()
    options = grain.MultiprocessingOptions(num_workers=workers)
    return dataset.to_iter_dataset().mp_prefetch(options)
