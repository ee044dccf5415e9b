"""The training recipe both papers and the baselines share: a declared ``Task`` in,
results.json and a printed table out.

``python -m i2ce_jax.train`` and ``python -m vtfn_jax.train`` are each one call of
``train_and_evaluate`` with their declaration (capsim.task.Task), so counting
epochs, building the dataset, fitting with dev evaluations, restoring the best
checkpoint, the final report and writing it happen here and nowhere else.
"""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ml_collections

from capsim import mesh as mesh_lib
from capsim.checkpoints import restore_model
from capsim.config_lib import IN_TURN, MEMBER_MODES
from capsim.eval.evaluators import Evaluators
from capsim.tables import format_table, results_rows
from capsim.task import Task
from capsim.train.members import MemoryFitError, PackTrainer, member_mode, shared_programs
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
    workdir, task = _declared(config, workdir, declare)
    model, summary = fit(config, workdir, task)
    return _report(config, workdir, task, model, summary)


def _declared(config: ml_collections.ConfigDict, workdir: str | Path, declare: Declare):
    mesh_lib.maybe_initialize_distributed()
    workdir = check_workdir(config, workdir)
    mesh_lib.local_batch_size(config.batch_size)
    return workdir, declare(config, workdir)


def _report(
    config: ml_collections.ConfigDict,
    workdir: Path,
    task: Task,
    model: Any,
    summary: dict,
    pack: dict | None = None,
) -> dict:
    """The final report of ``config.evals``, written as results.json and printed."""
    report = Evaluators(config.evals).report(task.final_subject(model))
    results = task.results(summary, report)
    if pack is not None:
        results["pack"] = pack
    if is_main_process():
        results_file = write_results(workdir, results)
        table = format_table(results_rows(results), ["task", "measure", "value"])
        print(f"\n{table}\n(all results: {results_file})", flush=True)
    return results


def train_and_evaluate_pack(
    configs: Sequence[ml_collections.ConfigDict],
    workdirs: Sequence[str | Path],
    declare: Declare,
    mode: str = "auto",
    member_output: Callable[[int], contextlib.AbstractContextManager] | None = None,
    finished: Callable[[int, dict | Exception], None] | None = None,
    fit_memory: bool = False,
) -> list[dict | Exception]:
    """The members of a pack (capsim.train.members), each the run ``train_and_evaluate``
    would make of its config and workdir; returns each member's results, or the error
    that stopped it (a member's error does not stop the others in turn; vmapped, it
    stops them all). ``mode``: "vmapped", "in_turn" or "auto" (``member_mode`` of the
    first member's model). Each results.json records how its member ran, under "pack".
    ``member_output(k)`` is entered around all member k prints (its log);
    ``finished(k, outcome)`` is called as member k ends. Vmapped members that do not fit
    in the device's memory stop with MemoryFitError, or with ``fit_memory`` are split into
    programs of as many as fit (an automatic pack size), and the log says so."""
    output = member_output or (lambda index: contextlib.nullcontext())
    finished = finished or (lambda index, outcome: None)
    declared = []
    for index, (config, workdir) in enumerate(zip(configs, workdirs, strict=True)):
        with output(index):
            declared.append(_declared(config, workdir, declare))
    tasks = [task for _, task in declared]
    if any(task.fit is not None for task in tasks):
        mode = IN_TURN  # a model fit without gradient steps has no step to vmap
    if mode == "auto":
        mode = member_mode(tasks[0].model)
    if mode not in MEMBER_MODES:
        raise ValueError(f"member mode {mode!r}: expected one of {MEMBER_MODES} or 'auto'")
    logging.warning("%d members %s", len(tasks), mode)
    if mode == IN_TURN:
        in_turn: list[dict | Exception] = []
        for index, (config, (workdir, task)) in enumerate(zip(configs, declared, strict=True)):
            with output(index):
                try:
                    model, summary = fit(config, workdir, task)
                    fact = {"mode": mode, "members": len(tasks), "index": index}
                    in_turn.append(_report(config, workdir, task, model, summary, fact))
                except Exception as error:
                    traceback.print_exc()
                    in_turn.append(error)
            finished(index, in_turn[-1])
        return in_turn
    for config, task in zip(configs, tasks, strict=True):
        steps_for_epochs(config, task.batches.examples)
    groups = shared_programs([t.model for t in tasks], [t.batches.tables for t in tasks])
    if len(groups) > 1:
        logging.warning(
            "members differ in their models' sizes or tables (each member's data makes its "
            "vocabulary): %d vmapped programs, of members %s",
            len(groups),
            " | ".join(",".join(str(k + 1) for k in group) for group in groups),
        )
    outcomes: dict[int, dict | Exception] = {}
    while groups:
        group = groups.pop(0)
        pack = PackTrainer(
            [configs[k] for k in group],
            [tasks[k].model for k in group],
            tasks[group[0]].loss_fn,
            tables=tasks[group[0]].batches.tables,
        )
        datasets = [tasks[k].batches.dataset(configs[k], pack.tables_on_device) for k in group]
        evaluators = [Evaluators(configs[k].evals, tasks[k].subject_of) for k in group]
        workdirs = [declared[k][0] for k in group]
        try:
            trained = pack.fit(workdirs, datasets, evaluators, lambda i, g=group: output(g[i]))
        except MemoryFitError as error:
            if not fit_memory or not 1 <= error.fits < len(group):
                raise
            size = error.fits
            logging.warning("pack size auto: %d members a program (%s)", size, error)
            groups[:0] = [group[k : k + size] for k in range(0, len(group), size)]
            continue
        if fit_memory:
            logging.warning("pack size auto: %d members a program fit in memory", len(group))
        for position, (index, result) in enumerate(zip(group, trained, strict=True)):
            (workdir, task), config = declared[index], configs[index]
            with output(index):
                restore_model(workdir, task.model)
                summary = task.summarize(result)
                fact = {"mode": mode, "members": len(group), "index": position}
                outcomes[index] = _report(config, workdir, task, task.model, summary, fact)
            finished(index, outcomes[index])
    return [outcomes[k] for k in range(len(tasks))]
