"""Train VTFN or a baseline: ``python -m vtfn_jax.train --config=configs/coco_bow.py --workdir=...``.

``train_and_evaluate(config, workdir)`` is the shared recipe (capsim.train.recipe)
run on the task this module declares: the run's data (vtfn_jax.data), then the
kind named by ``config.model.kind`` (``vtfn`` or a baseline, vtfn_jax.kinds.KINDS).
Every kind ends as an embedder behind ``SentenceEncoder.encode``'s path, so all
go through the same evaluation (the evaluators ``config.evals`` names), and
results.json holds the report, the training facts (``train``) and the kind.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import ml_collections

from capsim.task import Task
from capsim.train import recipe
from capsim.train.entry import run_training_cli
from capsim.workdir import DATA_FILE, VOCAB_FILE, is_main_process
from vtfn_jax import kinds
from vtfn_jax.data import prepare_data


def declare(config: ml_collections.ConfigDict, workdir: Path) -> Task:
    """The configured kind's task on the run's data (its vocabulary and sizes saved in
    ``workdir``, which loading reads), reported through the kind's embedders.

    Args:
        config: the run's config (``config.model.kind`` names the kind: ``vtfn`` or a
            baseline of ``vtfn_jax.kinds.KINDS``; ``config.data`` the captions and features).
        workdir: the run's folder; process 0 writes ``vocab.json`` and ``data.json`` there.

    Returns:
        The :class:`capsim.task.Task` that ``capsim.train.recipe`` trains and reports.
    """
    kind = kinds.kind_of(config)
    data = prepare_data(config)
    if is_main_process():
        data.vocab.save(workdir / VOCAB_FILE)
        sizes = {"feature_source": data.feature_source, "image_dim": data.image_dim}
        (workdir / DATA_FILE).write_text(json.dumps(sizes, indent=2) + "\n")

    def results(summary: dict, report: dict) -> dict:
        return {
            "feature_source": data.feature_source,
            **report,
            "train": summary,
            "model": config.model.kind,
        }

    return dataclasses.replace(
        kind.task(config, data),
        final_subject_of=lambda model: data.subject(*kind.embedders(model, data)),
        results=results,
    )


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str | Path) -> dict:
    """Trains the configured kind, runs the final report of ``config.evals``, writes results.json.

    The function behind ``python -m vtfn_jax.train``; notebooks and tests call it directly.
    Rerun on the same ``workdir``, it resumes from the last checkpoint (a finished run
    trains nothing and reports again).

    Args:
        config: a config as ``get_config`` of ``configs/coco_bow.py`` or
            ``configs/demo_bow.py`` returns it (overrides applied).
        workdir: the run's folder (created if needed): ``config.json``, ``vocab.json``,
            ``data.json``, ``metrics.jsonl``, TensorBoard events, ``checkpoints/`` and
            ``results.json``.

    Returns:
        The results: the final report of every evaluator ``config.evals`` names, the
        training facts under ``"train"``, ``"feature_source"`` and the model kind under
        ``"model"``, as written to ``results.json``.

    Raises:
        capsim.errors.CapsimError: bad data or config (the error names the file, line
            or key); ``UnusableCheckpointsError`` when no checkpoint of ``workdir`` can be
            read (nothing is changed; ``config.start_over`` starts again).

    Example::

        from configs import demo_bow
        from vtfn_jax.train import train_and_evaluate

        results = train_and_evaluate(demo_bow.get_config("runlocal"), "/tmp/vtfn_demo")
    """
    return recipe.train_and_evaluate(config, workdir, declare)


def cli() -> None:
    """The command ``python -m vtfn_jax.train --config=FILE[:arg] --workdir=DIR`` (and the
    console script ``vtfn-train``): parses the flags and calls :func:`train_and_evaluate`."""
    run_training_cli(train_and_evaluate)


if __name__ == "__main__":
    cli()
