"""grain input pipelines: shuffled, per-epoch reseeded, sharded by process, gathered by batch.

A batch is built in one call from an array of example indices (NumPy fancy
indexing over the encoded corpus and the feature matrix), not example by
example: per-example Python maps cap the pipeline near the speed of a BOW
training step (bench/throughput.py measures both).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import grain
import jax
import ml_collections
import numpy as np
from absl import flags

from capsim.data.device_tables import gather_tables
from capsim.mesh import local_batch_size

Batch = dict[str, np.ndarray]
MakeBatch = Callable[[np.ndarray, np.ndarray], Batch]

_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)

# Batches are built ahead in background threads. A few batches ahead is all a
# step needs; grain's default (16 threads, 500 elements) would hold 500 batches
# (half a gigabyte of VTFN features) and compete with XLA for the cores.
READ_OPTIONS = grain.ReadOptions(num_threads=2, prefetch_buffer_size=8)


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


@dataclasses.dataclass(frozen=True)
class LengthBuckets:
    """Batches of captions of similar length, each cut to its longest caption.

    ``widths[i]`` is the number of token positions example i needs: its
    caption's length, or the longest caption it brings along (another caption
    of its image). Widths round up to a ``multiple`` (at most ``max_width``),
    each epoch's batches are drawn within one rounded width where they can be,
    and a batch is cut to its widest example. The RNN scans then stop near the
    longest real caption instead of running every padded step, as PyTorch's
    packed RNNs do, and a handful of widths means a handful of compiles.

    The cost is in what a batch holds: its in-batch negatives have lengths like
    its positives. That is why it is a config choice (``data.length_buckets``).
    """

    widths: np.ndarray
    multiple: int
    max_width: int

    def rounded(self, rows: np.ndarray) -> np.ndarray:
        """The width each example's batch needs, rounded up to the multiple."""
        rounded = -(-self.widths[rows] // self.multiple) * self.multiple
        return np.minimum(rounded, self.max_width)

    def group(self, order: np.ndarray, batch_size: int, rng: np.random.Generator) -> np.ndarray:
        """``order``'s first full batches, regrouped into batches of one rounded width where
        possible (stable, so random within a width), the batches in a random order."""
        used = order[: len(order) // batch_size * batch_size]
        used = used[np.argsort(self.rounded(used), kind="stable")]
        batches = used.reshape(-1, batch_size)
        return batches[rng.permutation(len(batches))].reshape(-1)


@dataclasses.dataclass(frozen=True)
class TopicClusters:
    """Hard in-batch negatives: runs of ``size`` examples that share a content word.

    ``words[i]`` holds example i's content-word ids (-1 pads the row). Each epoch,
    every example draws one of its words; examples are sorted by that word (by
    width first, with length buckets, so that a run keeps to one width) and cut
    into runs of ``size``, which are shuffled. A batch of B then holds B / size
    runs: its negatives include captions of other images about the same thing
    ("dog" beside "dog"), not only unrelated ones. An example without content
    words draws a random key of its own.
    """

    words: np.ndarray
    size: int

    def group(
        self, order: np.ndarray, rng: np.random.Generator, widths: np.ndarray | None = None
    ) -> np.ndarray:
        """``order`` rearranged into shuffled runs of examples that drew the same word."""
        words = self.words[order]
        counts = (words >= 0).sum(axis=1)
        pick = np.minimum((rng.random(len(order)) * counts).astype(np.int64), counts - 1)
        ranked = np.sort(np.where(words >= 0, words, np.iinfo(words.dtype).max), axis=1)
        drawn = ranked[np.arange(len(order)), np.maximum(pick, 0)].astype(np.int64)
        keys = np.where(counts > 0, drawn, -1 - rng.integers(0, 1 << 30, len(order)))
        keys = (keys,) if widths is None else (keys, widths[order])
        clustered = order[np.lexsort(keys)]  # stable: ties keep order's random order
        whole = len(clustered) // self.size * self.size
        runs = clustered[:whole].reshape(-1, self.size)
        return np.concatenate([runs[rng.permutation(len(runs))].reshape(-1), clustered[whole:]])


class _EpochOrder:
    """The example order of each epoch: a permutation seeded by (seed, epoch), kept for one epoch.

    One NumPy permutation per epoch instead of grain's per-element shuffle, so a
    batch of indices costs a slice rather than one Python call per example.
    With topic clusters, the permutation is first cut into runs that share a word;
    with length buckets, its batches are then regrouped by width.
    """

    def __init__(
        self,
        num_examples: int,
        seed: int,
        batch_size: int,
        buckets: LengthBuckets | None,
        clusters: TopicClusters | None = None,
    ):
        self.num_examples, self.seed = num_examples, seed
        self.batch_size, self.buckets, self.clusters = batch_size, buckets, clusters
        self._orders: dict[int, np.ndarray] = {}

    def __call__(self, epoch: int) -> np.ndarray:
        order = self._orders.get(epoch)
        if order is None:
            rng = np.random.default_rng([self.seed, epoch])
            order = rng.permutation(self.num_examples)
            if self.clusters is not None:
                widths = (
                    None if self.buckets is None else self.buckets.rounded(np.arange(len(order)))
                )
                order = self.clusters.group(order, rng, widths)
            if self.buckets is not None:
                order = self.buckets.group(order, self.batch_size, rng)
            # Reader threads may still be in the previous epoch; the dict is swapped whole.
            kept = {e: o for e, o in self._orders.items() if e == epoch - 1}
            self._orders = {**kept, epoch: order}
        return order


def _local_batch(
    index: int,
    _: int,
    *,
    order: _EpochOrder,
    make_batch: MakeBatch,
    per_epoch: int,
    global_size: int,
    first: int,
    size: int,
) -> Batch:
    epoch, offset = divmod(index, per_epoch)
    epoch_order = order(epoch)
    start = offset * global_size + first
    positions = index * global_size + np.arange(first, first + size)
    rows, draws = epoch_order[start : start + size], uniform_draws(order.seed, positions)
    if order.buckets is None:
        return make_batch(rows, draws)
    # The width of the whole global batch, so that every process cuts its share alike.
    global_rows = epoch_order[offset * global_size : (offset + 1) * global_size]
    return make_batch(rows, draws, width=int(order.buckets.rounded(global_rows).max()))


def training_dataset(
    num_examples: int,
    make_batch: MakeBatch,
    *,
    global_batch_size: int,
    seed: int,
    num_epochs: int | None = None,
    workers: int = 0,
    length_buckets: LengthBuckets | None = None,
    topic_clusters: TopicClusters | None = None,
) -> grain.IterDataset:
    """Batches of examples ``0..num_examples-1`` in a new random order each epoch.

    Each epoch is ``num_examples // global_batch_size`` full batches; the
    remainder of its order is left out (a different remainder each epoch).

    ``make_batch(rows, draws)`` gathers this process's share of one global batch:
    ``rows`` are example indices [local batch] and ``draws`` one number in [0, 1)
    per example for its random choices (see ``uniform_draws``). Process p takes
    the p-th contiguous block of each global batch, so the global batch, in
    order, is the same for any number of processes. ``workers`` > 0 builds
    batches in that many grain worker processes, with the same batches in the
    same order; the iterator state (saved in checkpoints) resumes exactly.
    With ``length_buckets``, batches hold captions of similar width and
    ``make_batch`` is called with ``width=`` as well: it cuts its token arrays
    to that many positions. With ``topic_clusters``, a batch's examples come in
    runs that share a content word (hard negatives; see ``TopicClusters``).
    """
    local = local_batch_size(global_batch_size)
    per_epoch = num_examples // global_batch_size
    if not per_epoch:
        raise ValueError(f"{num_examples} examples do not fill one batch of {global_batch_size}")
    batch = functools.partial(
        _local_batch,
        order=_EpochOrder(num_examples, seed, global_batch_size, length_buckets, topic_clusters),
        make_batch=make_batch,
        per_epoch=per_epoch,
        global_size=global_batch_size,
        first=jax.process_index() * local,  # bound here: workers do not run jax.distributed
        size=local,
    )
    dataset = grain.MapDataset.range(per_epoch).repeat(num_epochs).map_with_index(batch)
    if not workers:
        return dataset.to_iter_dataset(READ_OPTIONS)
    if not flags.FLAGS.is_parsed():  # grain's workers read absl flags; scripts may not parse them
        flags.FLAGS.mark_as_parsed()
    options = grain.MultiprocessingOptions(num_workers=workers)
    return dataset.to_iter_dataset(READ_OPTIONS).mp_prefetch(options)


@dataclasses.dataclass(frozen=True)
class Batches:
    """How a model's training examples become batches: what ``training_dataset`` needs
    beside the run's batch size, seed and input workers, which the config gives.

    ``tables`` (capsim.data.device_tables) names large arrays the batches index, e.g.
    ``{"features": image_features}``: ``make_batch`` then emits ``"features_rows"``
    (int32 rows) in place of the rows themselves, and they are gathered on the host
    in grain's map or, placed by the Trainer, inside the train step. The loss sees
    the same batch either way.
    """

    examples: int
    make_batch: MakeBatch
    length_buckets: LengthBuckets | None = None
    topic_clusters: TopicClusters | None = None
    tables: Mapping[str, Any] | None = None

    def host_batch(self, rows: np.ndarray, draws: np.ndarray, **kwargs) -> Batch:
        """The batch as the loss sees it, its table rows gathered here on the host."""
        return gather_tables(self.tables or {}, self.make_batch(rows, draws, **kwargs))

    def batch_fn(self, tables_on_device: bool = False) -> MakeBatch:
        """What grain maps: ``make_batch`` itself when the Trainer holds the tables on the
        device (the batch carries their rows' indices), else ``host_batch``."""
        return self.make_batch if tables_on_device or not self.tables else self.host_batch

    def dataset(
        self, config: ml_collections.ConfigDict, tables_on_device: bool = False
    ) -> grain.IterDataset:
        """The grain dataset of ``config.batch_size`` batches, seeded by ``config.seed``;
        ``tables_on_device``: the Trainer's ``tables_on_device`` (rows gathered in its step)."""
        return training_dataset(
            self.examples,
            self.batch_fn(tables_on_device),
            global_batch_size=config.batch_size,
            seed=config.seed,
            workers=config.get("input_workers", 0),
            length_buckets=self.length_buckets,
            topic_clusters=self.topic_clusters,
        )
