"""The contract between a trained model and the training recipe both papers share.

A paper or a baseline declares a ``Task``: its model, its loss, how its data
becomes batches, how the evaluators see the model, and how its results read.
``capsim.train.recipe.train_and_evaluate`` does the rest, the same way for all
of them: epochs to steps, the dataset, the Trainer with its dev evaluations,
the best checkpoint restored, the final report, results.json and the table.

The contract sits here, below capsim.train, because the modules that declare a
task are the ones that also load a trained model back (vtfn_jax.kinds), and
loading must never import the trainer (tests/test_import_graph.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
from flax import nnx

from capsim.data.pipeline import Batches
from capsim.eval.evaluators import Subject

# ``loss_fn(model, batch, key) -> (loss, metrics)``, as capsim.train.trainer.Trainer takes it.
LossFn = Callable[[Any, Mapping[str, jax.Array], jax.Array], tuple[jax.Array, dict]]


def train_summary(result: Any) -> dict:
    """The run's facts for results.json: capsim.train.loop.TrainResult.summary()."""
    return result.summary()


def merged_results(summary: dict, report: dict) -> dict:
    """results.json as the training facts, then one entry per final-report evaluator."""
    return {**summary, **report}


@dataclasses.dataclass(frozen=True)
class Task:
    """One model to train, as its paper or baseline declares it.

    ``model``, ``loss_fn`` and ``batches`` go to the Trainer; ``subject_of(model)``
    is the model as the dev evaluators see it during training, and
    ``final_subject_of`` (default: the same) as the final report sees it.
    ``summarize(TrainResult)`` gives the training facts, and ``results(summary,
    report)`` lays out results.json. A model fit without gradient steps (word
    vectors) gives ``fit(workdir) -> (model, summary)`` instead of the Trainer's parts.
    """

    subject_of: Callable[[Any], Subject]
    model: nnx.Module | None = None
    loss_fn: LossFn | None = None
    batches: Batches | None = None
    fit: Callable[[Path], tuple[Any, dict]] | None = None
    summarize: Callable[[Any], dict] = train_summary
    final_subject_of: Callable[[Any], Subject] | None = None
    results: Callable[[dict, dict], dict] = merged_results

    def __post_init__(self):
        trainer_parts = (self.model, self.loss_fn, self.batches)
        if self.fit is None and any(part is None for part in trainer_parts):
            raise ValueError("a Task needs model, loss_fn and batches, or a fit function")

    def final_subject(self, model: Any) -> Subject:
        """The trained model as the final report's evaluators see it."""
        return (self.final_subject_of or self.subject_of)(model)
