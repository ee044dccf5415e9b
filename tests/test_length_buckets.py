"""Cutting a batch to its longest caption (data.length_buckets) changes no loss or gradient.

Encoders mask PAD positions, so a batch padded to max_len and the same batch
cut to its widest caption must give the same loss and gradients. This is what
makes length-bucketed batches a pure speed choice for a given batch.
"""

from __future__ import annotations

import importlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from capsim import text
from capsim.data import corpus as corpus_lib
from capsim.data.records import CaptionRecord
from configs import i2ce_coco_margin, i2ce_coco_triplet, i2ce_demo
from i2ce_jax import data as i2ce_data
from i2ce_jax import model as i2ce_model
from i2ce_jax import train as i2ce_train
from vtfn_jax import model as vtfn_model

VOCAB, IMAGE_DIM, BATCH = 40, 24, 8
PADDED, LONGEST = 16, 7


def _tokens(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    lengths = rng.integers(2, LONGEST + 1, BATCH)
    lengths[0] = LONGEST
    mask = np.arange(PADDED)[None, :] < lengths[:, None]
    return np.where(mask, rng.integers(4, VOCAB, (BATCH, PADDED)), 0).astype(np.int32), mask


def _i2ce(config_file):
    config = config_file.get_config("runlocal,embed=16,hidden=32")
    rng = np.random.default_rng(0)
    (anchor_ids, anchor_mask), (similar_ids, similar_mask) = _tokens(rng), _tokens(rng)
    batch = {
        "anchor_ids": anchor_ids,
        "anchor_mask": anchor_mask,
        "similar_ids": similar_ids,
        "similar_mask": similar_mask,
        "group": np.arange(BATCH) // 2,
    }
    return i2ce_model.build_model(config, VOCAB), i2ce_model.make_loss_fn(config), batch


def _vtfn(encoder: str):
    config = importlib.import_module(f"configs.demo_{encoder}").get_config("runlocal,dim=16")
    ids, mask = _tokens(np.random.default_rng(1))
    features = np.random.default_rng(2).standard_normal((BATCH, IMAGE_DIM), np.float32)
    batch = {"ids": ids, "mask": mask, "features": features, "group": np.arange(BATCH)}
    model = vtfn_model.build_model(config, VOCAB, IMAGE_DIM)
    return model, vtfn_model.make_loss_fn(config), batch


CASES = {
    "i2ce-margin": lambda: _i2ce(i2ce_coco_margin),
    "i2ce-triplet": lambda: _i2ce(i2ce_coco_triplet),
    **{f"vtfn-{name}": lambda name=name: _vtfn(name) for name in ("bow", "gru", "lstm", "cnn")},
}


def _cut(batch: dict, width: int) -> dict:
    return {k: v[:, :width] if k.endswith(("ids", "mask")) else v for k, v in batch.items()}


def _loss_and_grads(model, loss_fn, batch):
    def loss(m):
        value, _ = loss_fn(m, jax.tree.map(jnp.asarray, batch), jax.random.key(0))
        return value

    value, grads = nnx.value_and_grad(loss)(model)
    return float(value), nnx.to_pure_dict(grads)


@pytest.mark.parametrize("case", sorted(CASES))
def test_cutting_the_padding_keeps_loss_and_gradients(case):
    model, loss_fn, batch = CASES[case]()
    model.eval()  # no dropout: both calls see the same network
    full_loss, full_grads = _loss_and_grads(model, loss_fn, batch)
    cut_loss, cut_grads = _loss_and_grads(model, loss_fn, _cut(batch, LONGEST))
    np.testing.assert_allclose(cut_loss, full_loss, rtol=1e-5, atol=1e-6)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), cut_grads, full_grads
    )


def test_i2ce_batches_cut_to_the_width_they_are_given():
    captions = ["a dog", "a small brown dog runs", "two cats", "two cats sleep on a red sofa"]
    records = [CaptionRecord(f"img{i // 2}", str(i), t, "train") for i, t in enumerate(captions)]
    vocab = text.Vocab.build(text.tokenize(r.text) for r in records)
    corpus = corpus_lib.encode_corpus(records, vocab, max_len=12)
    make_batch = i2ce_data.make_batch_fn(corpus)
    rows, draws = np.array([0, 2]), np.zeros(2)
    width = int(corpus.length_buckets(1, with_other_captions=True).widths[rows].max())
    cut, full = make_batch(rows, draws, width=width), make_batch(rows, draws)
    assert cut["anchor_ids"].shape == cut["similar_ids"].shape == (2, width) and width < 12
    for key in ("anchor_ids", "anchor_mask", "similar_ids", "similar_mask"):
        np.testing.assert_array_equal(cut[key], full[key][:, :width])
        assert not full[key][:, width:].any()  # nothing real was cut away


@pytest.mark.slow  # the I2CE demo's whole training, a program per width (24 s)
def test_i2ce_demo_trains_on_length_bucketed_batches(tmp_path):
    """End to end through the trainer: fewer padded positions, and it still learns."""
    config = i2ce_demo.get_config("runlocal")
    config.data.length_buckets = 4
    summary = i2ce_train.train_and_evaluate(config, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["train/loss"] for r in rows if "train/loss" in r]
    assert losses[-1] < 0.8 * losses[0], losses
    assert summary["best_dev_same_image_auc"] > 60  # chance is 50, as in tests/test_i2ce.py
