"""capsim.embed: length buckets, fixed batch shapes, empty sentences, bad input."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from capsim import text
from capsim.embed import bucket_length, embed_sentences, rows_per_batch, tail_rows
from capsim.errors import CaptionError

VOCAB = text.Vocab.build([["a", "dog", "runs"], ["two", "cats"]])
SHAPES: list[tuple[int, int]] = []


def count_and_sum(ids, mask):
    """A stand-in encoder: [real tokens, sum of real ids]; records each batch shape."""
    SHAPES.append(tuple(ids.shape))
    return jnp.stack([mask.sum(axis=1), jnp.where(mask, ids, 0).sum(axis=1)], axis=1).astype(
        jnp.float32
    )


def test_buckets_are_fine_where_captions_live_and_coarse_beyond():
    assert [bucket_length(n) for n in (1, 8, 9, 13, 32, 33, 49, 65, 200)] == [
        8, 8, 12, 16, 32, 48, 64, 96, 256,
    ]  # fmt: skip
    assert rows_per_batch(16, 128) == 128 and rows_per_batch(256, 128) == 32
    assert rows_per_batch(100_000, 128) == 8  # never fewer than MIN_ROWS


def test_vectors_depend_on_the_sentence_only():
    SHAPES.clear()
    sentences = ["a dog runs", "", "two cats", "zzz qqq", " ", "dog " * 70]
    result = embed_sentences(count_and_sum, VOCAB, sentences, batch_size=4)
    assert list(result.empty) == [1, 4]
    assert np.all(result.vectors[[1, 4]] == 0)
    assert result.vectors[0, 0] == 5  # <S> a dog runs </S>
    assert (
        result.vectors[3, 0] == 4
        and result.vectors[3, 1] == text.BOS_ID + 2 * text.UNK_ID + text.EOS_ID
    )
    assert result.vectors[5, 0] == 72  # a 72-token sentence, no length limit
    alone = [embed_sentences(count_and_sum, VOCAB, [s]).vectors[0] for s in sentences]
    np.testing.assert_array_equal(np.stack(alone), result.vectors)
    assert all(rows == 8 for rows, _ in SHAPES)  # never fewer than MIN_ROWS rows


def test_a_bucket_runs_full_batches_then_its_rest_padded_to_a_power_of_two():
    assert [tail_rows(n) for n in (1, 8, 9, 16, 17, 100)] == [8, 8, 16, 16, 32, 128]
    SHAPES.clear()
    sentences = [f"a dog runs {'dog ' * (i % 2)}" for i in range(2 * 128 + 19)]
    result = embed_sentences(count_and_sum, VOCAB, sentences, batch_size=128)
    assert sorted(SHAPES) == [(32, 8), (128, 8), (128, 8)]  # 275 sentences: 128 + 128 + 19
    np.testing.assert_array_equal(result.vectors[:, 0], [5 + i % 2 for i in range(275)])


def test_only_empty_sentences_still_give_the_encoder_width():
    result = embed_sentences(count_and_sum, VOCAB, ["", "  "])
    assert result.vectors.shape == (2, 2) and list(result.empty) == [0, 1]


def test_non_strings_and_bad_bytes_name_the_sentence():
    with pytest.raises(CaptionError, match=r"'x'.*must be a string"):
        embed_sentences(count_and_sum, VOCAB, [3], ids=["x"])
    with pytest.raises(CaptionError, match=r"1.*UTF-8"):
        embed_sentences(count_and_sum, VOCAB, ["ok", b"caf\xe9"])
