"""Train an I2CE caption autoencoder: ``python -m i2ce_jax.train --config=... --workdir=...``.

``train_and_evaluate(config, workdir)`` is the whole job (notebooks and tests
call it directly): build the caption corpus, train with early stopping on
held-out captions, then report how well the scores agree with the judgments
the config names (the shapes world's rule-based ones for the demo).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import ml_collections
import numpy as np

from capsim.data import corpus as corpus_lib
from capsim.data import glove
from capsim.data.judgments import Judgment
from capsim.data.pipeline import training_dataset
from capsim.data.records import CaptionRecord
from capsim.eval import judgment_harness
from capsim.eval.correlation import format_table
from capsim.eval.same_diff import make_dev_eval
from capsim.train import mesh as mesh_lib
from capsim.train.checkpoint import restore_model
from capsim.train.entry import run_training_cli
from capsim.train.loop import steps_for_epochs, train_loop
from capsim.train.writers import is_main_process
from i2ce_jax.model import build_model, make_loss_fn
from i2ce_jax.scorer import VOCAB_FILE, I2CEScorer


def load_corpora(
    config: ml_collections.ConfigDict,
) -> tuple[list[CaptionRecord], list[CaptionRecord], list[Judgment]]:
    """Training captions, dev captions (for early stopping) and judgments to report on."""
    data = config.data
    if data.source == "shapes_world":
        from capsim.data.shapes_world import ShapesWorldConfig, generate_world

        world = generate_world(
            ShapesWorldConfig(num_scenes=data.shapes_world.num_scenes, seed=data.shapes_world.seed)
        )
        train = [r for r in world.captions if r.split == "train"]
        dev = [r for r in world.captions if r.split == "val"]
        judgments = [
            Judgment(c.image_id, c.text, f"{c.image_id}:{i}", c.references, c.quality)
            for i, c in enumerate(world.candidates)
        ]
        return train, dev, judgments
    if data.source == "files":
        records = corpus_lib.load_caption_files(data)
        train, dev = corpus_lib.hold_out_images(records, data.dev_images, config.seed)
        return train, dev, []
    raise ValueError(f"config.data.source must be 'shapes_world' or 'files', got {data.source!r}")


def make_example_fn(corpus: corpus_lib.EncodedCorpus):
    """An anchor caption plus a different caption of the same image (when it has one)."""

    def make_example(row: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        similar = corpus.other_caption(row, rng)
        return {
            "anchor_ids": corpus.ids[row],
            "anchor_mask": corpus.mask[row],
            "similar_ids": corpus.ids[similar],
            "similar_mask": corpus.mask[similar],
            "group": corpus.image_index[row],
        }

    return make_example


def judgment_report(
    scorer: I2CEScorer, judgments: list[Judgment], include_meteor: bool
) -> dict[str, float]:
    """Kendall τc × 100 of I2CE and the n-gram metrics against the judgments."""
    pairs = judgment_harness.group_judgments(judgments)
    scores, skipped = judgment_harness.ngram_metric_scores(pairs, include_meteor=include_meteor)
    for metric, reason in skipped.items():
        logging.info("%s not reported: %s", metric, reason)
    scores["I2CE"] = judgment_harness.score_pairs(pairs, scorer.compute_score)
    return judgment_harness.tau_c_table(pairs, scores)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str | Path) -> dict:
    """Trains I2CE as configured and returns the final metrics (also in results.json)."""
    mesh_lib.maybe_initialize_distributed()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    train_records, dev_records, judgments = load_corpora(config)
    data = config.data
    vocab = corpus_lib.build_vocab(train_records, data.min_count, data.max_vocab)
    if is_main_process():
        vocab.save(workdir / VOCAB_FILE)
    train = corpus_lib.encode_corpus(train_records, vocab, data.max_len)
    dev = corpus_lib.encode_corpus(dev_records, vocab, data.max_len)
    logging.info(
        "vocabulary %d, %d training captions of %d images, %d dev captions",
        len(vocab),
        len(train),
        len(train.image_ids),
        len(dev),
    )
    steps_for_epochs(config, len(train))
    dataset = training_dataset(
        range(len(train)),
        make_example_fn(train),
        global_batch_size=config.batch_size,
        seed=config.seed,
    )
    embedding_init = glove.vectors_for_vocab(
        config.model.glove, vocab, config.model.embed_dim, seed=config.seed
    )
    model = build_model(config, len(vocab), embedding_init)
    evaluate = make_dev_eval(
        dev.texts_by_image(), lambda m: I2CEScorer(m.encoder, vocab).embed, config.seed
    )
    result = train_loop(config, workdir, model, make_loss_fn(config), dataset, evaluate)
    restore_model(workdir, model)
    summary = result.summary()
    if judgments:
        scorer = I2CEScorer(model.encoder, vocab, pooling=config.scorer.pooling)
        summary["tau_c"] = judgment_report(scorer, judgments, config.eval.include_meteor)
        if is_main_process():
            rows = [{"metric": k, "Kendall tau-c x100": v} for k, v in summary["tau_c"].items()]
            print(format_table(rows, ["metric", "Kendall tau-c x100"]), flush=True)
    if is_main_process():
        (workdir / "results.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def cli() -> None:
    run_training_cli(train_and_evaluate)


if __name__ == "__main__":
    cli()
