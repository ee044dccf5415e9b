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
from capsim.train.members import MemoryFitError, PackTrainer, member_mode, programs
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
    that stopped it: in turn, a member's error stops no other member; vmapped, it stops
    the members of its program (``capsim.train.members.programs`` decides which share
    one). ``mode``: "vmapped", "in_turn" or "auto" (``member_mode`` of the first member's
    model); the log names the mode taken. Each results.json records how its member ran,
    under "pack". ``member_output(k)`` is entered around all member k prints (its log);
    ``finished(k, outcome)`` is called as member k ends. Vmapped members that do not fit
    in the device's memory end with MemoryFitError, or with ``fit_memory`` are split into
    programs of as many as fit (an automatic pack size), and the log says so."""
    output = member_output or (lambda index: contextlib.nullcontext())
    finished = finished or (lambda index, outcome: None)
    declared = []
    for index, (config, workdir) in enumerate(zip(configs, workdirs, strict=True)):
        with output(index):
            declared.append(_declared(config, workdir, declare))
    tasks = [task for _, task in declared]
    names = [workdir.name for workdir, _ in declared]
    chosen = mode
    if any(task.fit is not None for task in tasks):
        chosen = IN_TURN  # a model fit without gradient steps has no step to vmap
    elif mode == "auto":
        chosen = member_mode(tasks[0].model)
    if chosen not in MEMBER_MODES:
        raise ValueError(f"member mode {mode!r}: expected one of {MEMBER_MODES} or 'auto'")
    logging.warning("%d members %s (member mode asked: %s)", len(tasks), chosen, mode)
    outcomes: dict[int, dict | Exception] = {}

    def end(index: int, outcome: dict | Exception) -> None:
        outcomes[index] = outcome
        finished(index, outcome)

    if chosen == IN_TURN:
        for index, (config, (workdir, task)) in enumerate(zip(configs, declared, strict=True)):
            with output(index):
                try:
                    model, summary = fit(config, workdir, task)
                    fact = {"mode": chosen, "members": len(tasks), "index": index}
                    outcome = _report(config, workdir, task, model, summary, fact)
                except Exception as error:
                    traceback.print_exc()
                    outcome = error
            end(index, outcome)
        return [outcomes[k] for k in range(len(tasks))]
    for config, task in zip(configs, tasks, strict=True):
        steps_for_epochs(config, task.batches.examples)
    groups = programs(configs, [t.model for t in tasks], [t.batches.tables for t in tasks])
    if len(groups) > 1:
        logging.warning(
            "%d vmapped programs (members that differ in a constant of the step, their "
            "models' sizes or tables, where each member's data makes its vocabulary): %s",
            len(groups),
            " | ".join(", ".join(names[k] for k in group) for group in groups),
        )
    while groups:
        group = groups.pop(0)
        try:
            trained = _fit_program(configs, declared, group, output)
        except Exception as error:
            if isinstance(error, MemoryFitError) and fit_memory and 1 <= error.fits < len(group):
                size = error.fits
                logging.warning("pack size auto: %d members a program (%s)", size, error)
                groups[:0] = [group[k : k + size] for k in range(0, len(group), size)]
            else:
                _stopped(group, error, output, end)
            continue
        if fit_memory:
            logging.warning("pack size auto: %d members a program fit in memory", len(group))
        for position, (index, result) in enumerate(zip(group, trained, strict=True)):
            (workdir, task), config = declared[index], configs[index]
            with output(index):
                restore_model(workdir, task.model)
                summary = task.summarize(result)
                fact = {"mode": chosen, "members": len(group), "index": position}
                end(index, _report(config, workdir, task, task.model, summary, fact))
    return [outcomes[k] for k in range(len(tasks))]


def _fit_program(
    configs: Sequence[ml_collections.ConfigDict],
    declared: list[tuple[Path, Task]],
    group: list[int],
    output: Callable[[int], contextlib.AbstractContextManager],
) -> list:
    """The members ``group`` trained by one vmapped program; their TrainResults."""
    workdirs = [declared[k][0] for k in group]
    members = [(configs[k], declared[k][1]) for k in group]
    first = members[0][1]
    pack = PackTrainer(
        [config for config, _ in members],
        [task.model for _, task in members],
        first.loss_fn,
        tables=first.batches.tables,
    )
    datasets = [task.batches.dataset(config, pack.tables_on_device) for config, task in members]
    evaluators = [Evaluators(config.evals, task.subject_of) for config, task in members]
    return pack.fit(workdirs, datasets, evaluators, lambda i: output(group[i]))


def _stopped(
    group: list[int],
    error: Exception,
    output: Callable[[int], contextlib.AbstractContextManager],
    end: Callable[[int, dict | Exception], None],
) -> None:
    """Each member of a program that ``error`` stopped: the traceback in its log, its outcome."""
    for index in group:
        with output(index):
            traceback.print_exception(error)
        end(index, error)
