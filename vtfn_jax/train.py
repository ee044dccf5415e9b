"""Train VTFN or a baseline: ``python -m vtfn_jax.train --config=configs/coco_bow.py --workdir=...``.

``train_and_evaluate(config, workdir)`` prepares the data, trains the model
kind named by ``config.model.kind`` (``vtfn`` or a baseline from
``vtfn_jax.baselines``), runs the evaluators that ``config.evals`` names
(capsim.eval.evaluators) and writes ``results.json``. Every kind ends as an
Embedder behind a ``SentenceEncoder``, so all go through the same evaluation.
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_collections
import numpy as np

from capsim import mesh as mesh_lib
from capsim.checkpoints import restore_model
from capsim.data.corpus import CaptionSplit
from capsim.data.pipeline import training_dataset
from capsim.eval.evaluators import Evaluators, Subject
from capsim.tables import format_table, results_rows
from capsim.train.entry import run_training_cli
from capsim.train.optimizer import steps_for_epochs
from capsim.train.preflight import check_workdir
from capsim.train.trainer import Trainer
from capsim.workdir import DATA_FILE, VOCAB_FILE, is_main_process, write_results
from vtfn_jax import baselines
from vtfn_jax.data import VtfnData, prepare_data
from vtfn_jax.evaluate import evaluate_trained, subject_for
from vtfn_jax.model import VTFN, make_loss_fn
from vtfn_jax.sentence_encoder import SentenceEncoder
from vtfn_jax.workdir import image_embedder, model_for, text_embedder


def make_batch_fn(split: CaptionSplit, pivot: bool):
    """Captions with their images' features (and, for the pivot loss, other captions of them)."""
    corpus = split.corpus

    def make_batch(
        rows: np.ndarray, draws: np.ndarray, width: int | None = None
    ) -> dict[str, np.ndarray]:
        images = corpus.image_index[rows]
        ids, mask = corpus.tokens(rows, width)
        batch = {
            "ids": ids,
            "mask": mask,
            "features": split.features[images],
            "group": images.astype(np.int32),
        }
        if pivot:
            other = corpus.other_captions(rows, draws)
            batch["pivot_ids"], batch["pivot_mask"] = corpus.tokens(other, width)
        return batch

    return make_batch


def vtfn_subject(model: VTFN, data: VtfnData) -> Subject:
    encoder = SentenceEncoder(text_embedder(model, data.vocab), image_embedder(model))
    return subject_for(data, encoder)


def train_vtfn(config: ml_collections.ConfigDict, workdir: Path, data: VtfnData):
    """Trains the text tower and W; returns (text embedder, image embedder, train summary)."""
    train = data.splits["train"]
    steps_for_epochs(config, len(train.corpus))
    pivot = config.loss.pivot_weight > 0
    dataset = training_dataset(
        len(train.corpus),
        make_batch_fn(train, pivot),
        global_batch_size=config.batch_size,
        seed=config.seed,
        workers=config.get("input_workers", 0),
        length_buckets=train.corpus.length_buckets(
            config.data.get("length_buckets", 0), with_other_captions=pivot
        ),
    )
    model = model_for(config, data)
    evaluators = Evaluators(config.evals, lambda m: vtfn_subject(m, data))
    result = Trainer(config, model, make_loss_fn(config)).fit(workdir, dataset, evaluators)
    restore_model(workdir, model)
    summary = result.summary()
    return text_embedder(model, data.vocab), image_embedder(model), summary


TRAINERS = {"vtfn": train_vtfn, **{kind: train for kind, (train, _) in baselines.KINDS.items()}}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str | Path) -> dict:
    """Trains the configured kind, runs the final report of ``config.evals``, writes results.json."""
    mesh_lib.maybe_initialize_distributed()
    workdir = check_workdir(config, workdir)  # writable, same model as any run already there
    mesh_lib.local_batch_size(config.batch_size)  # the batch splits over the devices
    data = prepare_data(config)
    if is_main_process():
        data.vocab.save(workdir / VOCAB_FILE)
        sizes = {"feature_source": data.feature_source, "image_dim": data.image_dim}
        (workdir / DATA_FILE).write_text(json.dumps(sizes, indent=2) + "\n")
    if config.model.kind not in TRAINERS:
        raise KeyError(f"unknown model.kind {config.model.kind!r}; known: {sorted(TRAINERS)}")
    embedder, image_embed, summary = TRAINERS[config.model.kind](config, workdir, data)
    results = evaluate_trained(config, data, embedder, image_embed)
    results["train"] = summary
    results["model"] = config.model.kind
    if is_main_process():
        results_file = write_results(workdir, results)
        table = format_table(results_rows(results), ["task", "measure", "value"])
        print(f"\n{table}\n(all results: {results_file})", flush=True)
    return results


def cli() -> None:
    run_training_cli(train_and_evaluate)


if __name__ == "__main__":
    cli()
