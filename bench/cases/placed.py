"""A training case's step compiled and its batches placed on the devices, as every bench
times it: the library's own step (capsim.train.Trainer's, over the data mesh)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import jax
import ml_collections
import numpy as np
from flax import nnx

from bench.cases.catalogue import HostBatch, TrainingCase
from capsim.train import Trainer


def process_rows(batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """This process's rows of a case's batch: every process_count-th one."""
    share = slice(jax.process_index(), None, jax.process_count())
    return {k: v[share] for k, v in batch.items()}


def placed_batch(trainer: Trainer, batch: Mapping[str, np.ndarray]) -> dict[str, jax.Array]:
    """A case's batch as the step's global batch (``process_rows`` on each process)."""
    return trainer.global_batch(process_rows(batch))


@dataclasses.dataclass
class PlacedSteps:
    """The library's step compiled for a case, its state and batches on the devices."""

    case: TrainingCase
    compiled: jax.stages.Compiled
    state: object
    batches: list[dict[str, jax.Array]]
    tables: dict[str, jax.Array]  # the Trainer's device tables ({}: none, batches hold rows)
    seed: jax.Array
    done: int = 0

    @classmethod
    def prepare(cls, case: TrainingCase) -> PlacedSteps:
        """Compiles the step (``capsim.train.Trainer``'s, over the data mesh) and places
        the batches, this process's rows of each."""
        trainer = Trainer(case.config, case.model, case.loss_fn)
        batches = [placed_batch(trainer, b) for b in case.batches]
        lowered = trainer.train_step.lower(trainer.state, batches[0], trainer.tables, trainer.seed)
        return cls(case, lowered.compile(), trainer.state, batches, trainer.tables, trainer.seed)

    def run(self, count: int) -> dict[str, jax.Array]:
        """``count`` more steps, waited for; the last step's metrics."""
        metrics = None
        for _ in range(count):
            i, self.done = self.done, self.done + 1
            batch = self.batches[i % len(self.batches)]
            self.state, metrics = self.compiled(self.state, batch, self.tables, self.seed)
        jax.block_until_ready((self.state, metrics))
        return metrics


class JaxRunner:
    """The library's train step on host batches, as the papers' trainings run it
    (``Trainer.step`` on ``Trainer.global_batch``), each call waited for."""

    def __init__(self, config: ml_collections.ConfigDict, model: nnx.Module, loss_fn: Callable):
        self.trainer = Trainer(config, model, loss_fn)

    def __call__(self, batches: Sequence[HostBatch]) -> None:
        metrics = None
        for host_batch in batches:
            metrics = self.trainer.step(self.trainer.global_batch(host_batch))
        jax.block_until_ready((self.trainer.state, metrics))
