"""Train an I2CE caption autoencoder: ``python -m i2ce_jax.train --config=... --workdir=...``.

``train_and_evaluate(config, workdir)`` is the whole job (notebooks and tests
call it directly): the shared recipe (capsim.train.recipe) runs the task this
module declares: the caption corpus of i2ce_jax.data, the autoencoder and its
loss, early stopping on held-out captions, then the final-report evaluators of
``config.evals`` (human judgments: the shapes world's rule-based ones for the
demo, Flickr8k-Expert for the COCO configs when its files are there).
"""

from __future__ import annotations

from pathlib import Path

import ml_collections

from capsim.data import glove
from capsim.eval.evaluators import Subject
from capsim.task import Task
from capsim.train import recipe
from capsim.train.entry import run_training_cli
from capsim.workdir import VOCAB_FILE, is_main_process
from i2ce_jax.data import encoded_corpora, single_caption_images, training_batches
from i2ce_jax.model import I2CEAutoencoder, build_model, make_loss_fn
from i2ce_jax.scorer import I2CEScorer


def declare(config: ml_collections.ConfigDict, workdir: Path) -> Task:
    """The I2CE task: its captions (the vocabulary saved in ``workdir``), model and loss;
    the evaluators score captions with the model's encoder, as ``I2CEScorer`` does."""
    vocab, train, dev, world = encoded_corpora(config)
    if is_main_process():
        vocab.save(workdir / VOCAB_FILE)
    embedding_init = glove.initial_word_vectors(config, vocab)

    def subject_of(model: I2CEAutoencoder) -> Subject:
        scorer = I2CEScorer(model.encoder, vocab, pooling=config.scorer.pooling)
        return Subject(scorer.embed, scorer.compute_score, splits=dev, world=world)

    return Task(
        subject_of=subject_of,
        model=build_model(config, len(vocab), embedding_init),
        loss_fn=make_loss_fn(config, single_captions=single_caption_images(train) > 0),
        batches=training_batches(config, train),
    )


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str | Path) -> dict:
    """Trains I2CE as configured and returns the final metrics (also in results.json)."""
    return recipe.train_and_evaluate(config, workdir, declare)


def cli() -> None:
    run_training_cli(train_and_evaluate)


if __name__ == "__main__":
    cli()
