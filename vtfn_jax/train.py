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
    ``workdir``, which loading reads), reported through the kind's embedders."""
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
    """Trains the configured kind, runs the final report of ``config.evals``, writes results.json."""
    return recipe.train_and_evaluate(config, workdir, declare)


def cli() -> None:
    run_training_cli(train_and_evaluate)


if __name__ == "__main__":
    cli()
