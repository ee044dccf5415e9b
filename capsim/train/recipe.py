"""The training recipe both papers and the baselines share: a declared ``Task`` in,
results.json and a printed table out.

``python -m i2ce_jax.train`` and ``python -m vtfn_jax.train`` are each one call of
``train_and_evaluate`` with their declaration (capsim.task.Task), so counting
epochs, building the dataset, fitting with dev evaluations, restoring the best
checkpoint, the final report and writing it happen here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_collections

from capsim import mesh as mesh_lib
from capsim.checkpoints import restore_model
from capsim.eval.evaluators import Evaluators
from capsim.tables import format_table, results_rows
from capsim.task import Task
from capsim.train.optimizer import steps_for_epochs
from capsim.train.preflight import check_workdir
from capsim.train.trainer import Trainer
from capsim.workdir import is_main_process, write_results

Declare = Callable[[ml_collections.ConfigDict, Path], Task]


def fit(config: ml_collections.ConfigDict, workdir: Path, task: Task) -> tuple[Any, dict]:
    """(the trained model, its training facts): the Trainer with early stopping on the dev
    evaluators, then the best checkpoint restored; or the task's own ``fit``."""
    if task.fit is not None:
        return task.fit(workdir)
    steps_for_epochs(config, task.batches.examples)
    evaluators = Evaluators(config.evals, task.subject_of)
    trainer = Trainer(config, task.model, task.loss_fn, tables=task.batches.tables)
    dataset = task.batches.dataset(config, tables_on_device=trainer.tables_on_device)
    result = trainer.fit(workdir, dataset, evaluators)
    restore_model(workdir, task.model)
    return task.model, task.summarize(result)


def train_and_evaluate(
    config: ml_collections.ConfigDict, workdir: str | Path, declare: Declare
) -> dict:
    """Trains the task ``declare(config, workdir)`` gives, runs the final report of
    ``config.evals`` on it, writes results.json and prints its table; returns the results.

    Before declaring: the distributed runtime (multi-host runs), the workdir's
    checks (writable, the same model as any run already there) and the batch's
    split over the devices, so that a bad run stops before its data is read.
    """
    mesh_lib.maybe_initialize_distributed()
    workdir = check_workdir(config, workdir)
    mesh_lib.local_batch_size(config.batch_size)
    task = declare(config, workdir)
    model, summary = fit(config, workdir, task)
    report = Evaluators(config.evals).report(task.final_subject(model))
    results = task.results(summary, report)
    if is_main_process():
        results_file = write_results(workdir, results)
        table = format_table(results_rows(results), ["task", "measure", "value"])
        print(f"\n{table}\n(all results: {results_file})", flush=True)
    return results
