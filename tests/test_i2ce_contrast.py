"""I2CE's contrast negatives (issue 60, item 4): each anchor with one colour, number or
object word swapped, as a negative of its own in the InfoNCE branch."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from flax import nnx

from capsim import text
from capsim.data.corpus import EncodedCorpus
from capsim.data.records import CaptionRecord
from i2ce_jax import model as i2ce_model
from i2ce_jax.data import WordSwaps, make_batch_fn
from i2ce_jax.pretrained.recipe import get_config

VOCAB = text.Vocab.build(
    [["a", "red", "blue", "dog", "puppy", "cat", "two", "three", "on", "grass", "teddy"]]
)
KINDS = {"red": 0, "blue": 0, "two": 1, "three": 1, "dog": 2, "puppy": 2, "cat": 2}


def ids_of(*captions: str) -> np.ndarray:
    rows = [VOCAB.sentence_ids(c) for c in captions]
    out = np.zeros((len(rows), max(map(len, rows))), np.int32)
    for r, row in enumerate(rows):
        out[r, : len(row)] = row
    return out


def test_swaps_know_their_words_and_skip_others():
    swaps = WordSwaps.of(VOCAB)
    for word in VOCAB.itos:
        assert swaps.kind[VOCAB.stoi[word]] == KINDS.get(word, -1), word


def test_one_word_of_each_row_is_swapped_within_its_kind_and_never_within_a_category():
    swaps = WordSwaps.of(VOCAB)
    ids = ids_of("a red dog on grass", "two cat", "a puppy", "on grass", "teddy")
    seen = set()
    for seed in range(40):
        out = swaps.contrast(ids, np.random.default_rng(seed))
        changed = out != ids
        assert changed[:3].sum(axis=1).tolist() == [1, 1, 1]  # one word a row
        assert not changed[3:].any()  # nothing to swap: the row comes back as it was
        for row, col in zip(*np.nonzero(changed), strict=True):
            before, after = VOCAB.itos[ids[row, col]], VOCAB.itos[out[row, col]]
            assert KINDS[before] == KINDS[after], (before, after)
            assert {before, after} != {"dog", "puppy"}  # one COCO category: not a swap
            seen.add((before, after))
    assert ("red", "blue") in seen and ("two", "three") in seen and ("puppy", "cat") in seen


def _corpus() -> EncodedCorpus:
    captions = ["a red dog on grass", "a blue dog", "two cat", "on grass"]
    ids = ids_of(*captions)
    return EncodedCorpus(
        records=[CaptionRecord(str(i // 2), str(i), c, "train") for i, c in enumerate(captions)],
        ids=ids,
        mask=ids != text.PAD_ID,
        image_index=np.array([0, 0, 1, 1]),
        image_ids=["0", "1"],
        captions_of_image=[np.array([0, 1]), np.array([2, 3])],
    )


def test_batches_carry_contrast_rows_drawn_from_the_draws():
    make_batch = make_batch_fn(_corpus(), WordSwaps.of(VOCAB))
    rows, draws = np.array([0, 1, 2, 3]), np.array([0.1, 0.5, 0.7, 0.9])
    batch = make_batch(rows, draws)
    again = make_batch(rows, draws)
    np.testing.assert_array_equal(batch["contrast_ids"], again["contrast_ids"])  # resumable
    assert batch["contrast_mask"].any(axis=1).tolist() == [True, True, True, False]
    assert (batch["contrast_ids"] != batch["anchor_ids"]).sum(axis=1).tolist() == [1, 1, 1, 0]
    assert "contrast_ids" not in make_batch_fn(_corpus())(rows, draws)


def test_the_contrast_loss_adds_a_negative_and_learns_from_it():
    config = get_config("runlocal,embed=8,hidden=16,contrast=True")
    model = i2ce_model.build_model(config, len(VOCAB))
    batch = make_batch_fn(_corpus(), WordSwaps.of(VOCAB))(np.arange(4), np.full(4, 0.3))
    with_contrast = i2ce_model.make_loss_fn(config)
    config.loss.contrast = False
    without = i2ce_model.make_loss_fn(config)
    key = jax.random.key(0)
    (total, metrics), grads = nnx.value_and_grad(with_contrast, has_aux=True)(model, batch, key)
    assert np.isfinite(total)
    assert metrics["semantic"] > without(model, batch, key)[1]["semantic"]
    leaves = jax.tree.leaves(grads)
    assert all(np.all(np.isfinite(g)) for g in leaves) and any(np.any(g != 0) for g in leaves)


@pytest.mark.parametrize("loss", ["margin", "triplet", "none"])
def test_contrast_needs_the_infonce_branch(loss):
    config = get_config(f"runlocal,loss={loss},contrast=True")
    with pytest.raises(ValueError, match=r"contrast.*needs the infonce branch"):
        i2ce_model.make_loss_fn(config)


def test_contrast_batches_need_the_vocabulary():
    from i2ce_jax.data import training_batches

    config = get_config("runlocal,contrast=True")
    with pytest.raises(ValueError, match="needs the vocab"):
        training_batches(config, _corpus())
    assert training_batches(config, _corpus(), VOCAB).make_batch is not None
