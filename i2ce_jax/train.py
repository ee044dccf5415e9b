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
    the evaluators score captions with the model's encoder, as ``I2CEScorer`` does.

    Args:
        config: the run's config (``config.data`` the caption sources, ``config.model``
            the autoencoder, ``config.loss`` the branch).
        workdir: the run's folder; process 0 writes ``vocab.json`` there.

    Returns:
        The :class:`capsim.task.Task` that ``capsim.train.recipe`` trains and reports.
    """
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
        batches=training_batches(config, train, vocab),
    )


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str | Path) -> dict:
    """Trains I2CE as configured and returns the final metrics (also in results.json).

    The function behind ``python -m i2ce_jax.train``; notebooks and tests call it directly.
    Rerun on the same ``workdir``, it resumes from the last checkpoint (a finished run
    trains nothing and reports again). A finished workdir is what
    ``I2CEScorer.from_checkpoint`` loads.

    Args:
        config: a config as ``get_config`` of ``configs/i2ce_demo.py`` or
            ``configs/i2ce_coco_margin.py`` returns it (overrides applied).
        workdir: the run's folder (created if needed): ``config.json``, ``vocab.json``,
            ``metrics.jsonl``, TensorBoard events, ``checkpoints/`` and ``results.json``.

    Returns:
        The results: the final report of every evaluator ``config.evals`` names (for
        the demo, Kendall τc against the shapes world's caption-quality scores beside
        BLEU, ROUGE-L and CIDEr) and the training facts under ``"train"``, as written to
        ``results.json``.

    Raises:
        capsim.errors.CapsimError: bad data or config (the error names the file, line
            or key); ``UnusableCheckpointsError`` when no checkpoint of ``workdir`` can be
            read (nothing is changed; ``config.start_over`` starts again).

    Example::

        from configs import i2ce_demo
        from i2ce_jax.train import train_and_evaluate

        results = train_and_evaluate(i2ce_demo.get_config("runlocal"), "/tmp/i2ce_demo")
    """
    return recipe.train_and_evaluate(config, workdir, declare)


def cli() -> None:
    """The command ``python -m i2ce_jax.train --config=FILE[:arg] --workdir=DIR`` (and the
    console script ``i2ce-train``): parses the flags and calls :func:`train_and_evaluate`."""
    run_training_cli(train_and_evaluate)


if __name__ == "__main__":
    cli()
