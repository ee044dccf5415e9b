"""grain input pipelines: shuffled, per-epoch reseeded, sharded by process, batched."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grain
import jax
import numpy as np
from absl import flags

from capsim.train.mesh import local_batch_size


def training_dataset(
    source: Sequence[Any],
    make_example: Callable[[Any, np.random.Generator], dict[str, np.ndarray]],
    *,
    global_batch_size: int,
    seed: int,
    num_epochs: int | None = None,
    workers: int = 0,
) -> grain.IterDataset:
    """Examples from ``source`` in a new random order each epoch, this process's share only.

    ``make_example(item, rng)`` turns one source item into a dict of arrays; its
    ``rng`` is derived from the seed and the item's global position, so runs repeat
    exactly and the iterator state (saved in checkpoints) resumes exactly.
    ``workers`` > 0 builds batches in that many grain worker processes; the
    batches and their order are the same as with none (tests/test_pipeline.py).
    """
    dataset = grain.MapDataset.source(source).seed(seed).shuffle().repeat(num_epochs)
    # Random choices are made before the process split, so each example is the
    # same whatever the number of processes.
    dataset = dataset.random_map(make_example)
    dataset = dataset[jax.process_index() :: jax.process_count()]
    dataset = dataset.batch(local_batch_size(global_batch_size), drop_remainder=True)
    if not workers:
        return dataset.to_iter_dataset()
    if not flags.FLAGS.is_parsed():  # grain's workers read absl flags; scripts may not parse them
        flags.FLAGS.mark_as_parsed()
    options = grain.MultiprocessingOptions(num_workers=workers)
    return dataset.to_iter_dataset().mp_prefetch(options)
