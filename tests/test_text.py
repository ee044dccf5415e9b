"""The model tokeniser, Vocab and encode: behaviour and bad input."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from capsim import text as text_module
from capsim.errors import CaptionError, DataFormatError
from capsim.text import (
    BOS,
    EOS,
    PAD,
    UNK,
    Vocab,
    encode,
    tokenize,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A Dog runs.", ["a", "dog", "runs", "."]),
        ("Don't stop!", ["do", "n't", "stop", "!"]),
        ("It's the dog's ball", ["it", "'s", "the", "dog", "'s", "ball"]),
        ("A man 's hat", ["a", "man", "'s", "hat"]),
        (
            "they're, we'll, I've, I'm, he'd",
            ["they", "'re", ",", "we", "'ll", ",", "i", "'ve", ",", "i", "'m", ",", "he", "'d"],
        ),
        ("won't can't", ["wo", "n't", "ca", "n't"]),
        ("the dogs' toys", ["the", "dogs", "'", "toys"]),
        ("a snow-covered T-shirt", ["a", "snow-covered", "t-shirt"]),
        ("wait -- what...", ["wait", "--", "what", "..."]),
        ('a "big" (red) ball', ["a", '"', "big", '"', "(", "red", ")", "ball"]),
        ("3.5 km, 1,000 times", ["3.5", "km", ",", "1,000", "times"]),
        ("it\u2019s", ["it", "'s"]),
        ("  two\n lines\t here ", ["two", "lines", "here"]),
        ("cannot", ["can", "not"]),
        ("", []),
        (" \n\t ", []),
    ],
)
def test_tokenize(text, expected):
    assert tokenize(text) == expected


PLAIN_OR_NEARLY = [
    "a dog runs on the grass.",
    "A Dog Runs On The Grass",
    "two 3 year old kids play with 12 toys.",
    "CANNOT be seen.",  # "cannot" is split even in a plain caption
    "he cannot.",
    "a  dog.",  # two spaces: not plain, the regex decides
    " a dog.",
    "a dog..",
    "a dog,",
    "a dog. a cat.",
    ".",
    "",
    "caf\u00e9 au lait.",
    "it\u2019s a dog.",
]


@pytest.mark.parametrize("caption", PLAIN_OR_NEARLY)
def test_plain_captions_take_a_short_way_to_the_regex_tokens(caption):
    folded = caption.lower().translate(text_module._QUOTE_FOLD)
    assert tokenize(caption) == list(text_module._matched_tokens(folded))


def test_the_short_way_gives_the_regex_tokens_on_every_coco_caption(shared_data):
    payload = json.loads((shared_data / "coco" / "captions_val2017.json").read_text())
    captions = [row["caption"] for row in payload["annotations"]]
    plain = 0
    for caption in captions:
        folded = caption.lower().translate(text_module._QUOTE_FOLD)
        expected = text_module._matched_tokens(folded)
        assert text_module._tokens(caption) == expected, caption
        plain += bool(text_module._PLAIN_RE.fullmatch(folded.removesuffix(".")))
    assert plain > 0.75 * len(captions)  # the short way is the common one (78%)


def _toy_vocab() -> Vocab:
    return Vocab.build([["a", "dog", "runs"], ["a", "cat"], ["a", "dog"], ["the"]])


def test_vocab_build_orders_by_count_then_token():
    vocab = _toy_vocab()
    assert vocab.itos == [PAD, UNK, BOS, EOS, "a", "dog", "cat", "runs", "the"]
    assert [vocab.pad_id, vocab.unk_id, vocab.bos_id, vocab.eos_id] == [0, 1, 2, 3]
    assert vocab.stoi["dog"] == 5
    assert len(vocab) == 9


def test_vocab_min_count_and_max_size_counts_specials():
    corpus = [["a", "dog", "runs"], ["a", "cat"], ["a", "dog"], ["the"]]
    assert Vocab.build(corpus, min_count=2).itos[4:] == ["a", "dog"]
    assert Vocab.build(corpus, max_size=6).itos == [PAD, UNK, BOS, EOS, "a", "dog"]
    assert len(Vocab.build(corpus, max_size=2)) == 4


def test_vocab_lookup_decode():
    vocab = _toy_vocab()
    assert vocab.lookup(["a", "zebra", "the"]) == [4, 1, 8]
    assert vocab.decode(np.array([2, 4, 5, 3])) == [BOS, "a", "dog", EOS]


def test_vocab_save_load_roundtrip(tmp_path):
    vocab = _toy_vocab()
    path = tmp_path / "vocab.json"
    vocab.save(path)
    payload = json.loads(path.read_text())
    assert payload["format"] == "capsim.vocab/1"
    assert payload["counts"]["a"] == 3
    loaded = Vocab.load(path)
    assert loaded.itos == vocab.itos and loaded.stoi == vocab.stoi


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        ("{not json", "not a JSON"),
        ('{"format": "other/1", "tokens": []}', "capsim.vocab/1"),
        ('{"format": "capsim.vocab/1", "tokens": ["a", "b"]}', "bad vocabulary"),
    ],
)
def test_vocab_load_errors_name_the_file(tmp_path, content, message):
    path = tmp_path / "vocab.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DataFormatError, match=message) as info:
        Vocab.load(path)
    assert str(path) in str(info.value)


def _reference_encode(vocab, texts, max_len):
    """Row-by-row encoding to check the vectorised one against."""
    ids = np.zeros((len(texts), max_len), np.int32)
    for row, text in enumerate(texts):
        tokens = [vocab.bos_id, *vocab.lookup(tokenize(text)), vocab.eos_id]
        ids[row, : len(tokens)] = tokens
    return ids


def test_encode_matches_row_by_row_reference():
    vocab = _toy_vocab()
    texts = ["A dog runs.", "the cat", "a zebra and a dog", "A"]
    encoded = encode(vocab, texts, max_len=8)
    np.testing.assert_array_equal(encoded.ids, _reference_encode(vocab, texts, 8))
    np.testing.assert_array_equal(encoded.lengths, [6, 4, 7, 3])
    np.testing.assert_array_equal(encoded.mask, encoded.ids != 0)
    assert encoded.ids.dtype == np.int32 and encoded.lengths.dtype == np.int32
    assert encoded.mask.dtype == bool and encoded.ids.shape == (4, 8)


def test_encode_without_bos_eos_and_bytes_input():
    vocab = _toy_vocab()
    encoded = encode(vocab, [b"a dog", "the"], max_len=3, add_bos=False, add_eos=False)
    np.testing.assert_array_equal(encoded.ids, [[4, 5, 0], [8, 0, 0]])
    np.testing.assert_array_equal(encoded.lengths, [2, 1])


def test_encode_truncate_keeps_first_tokens_and_ends_with_eos():
    vocab = _toy_vocab()
    encoded = encode(vocab, ["a dog runs the cat"], max_len=4, too_long="truncate")
    assert vocab.decode(encoded.ids[0]) == [BOS, "a", "dog", EOS]


@pytest.mark.parametrize(
    ("texts", "kwargs", "bad_id", "message"),
    [
        (["a dog", "   "], {}, 1, "empty"),
        (["a dog", ""], {"ids": ["img1#0", "img1#1"]}, "img1#1", "empty"),
        (["zebra giraffe"], {"ids": ["coco-42"]}, "coco-42", "out of vocabulary"),
        (["a dog runs the cat"], {"ids": ["long-1"]}, "long-1", "exceed max_len"),
        (["a dog", b"a \xff dog"], {}, 1, "UTF-8"),
    ],
)
def test_encode_errors_name_the_caption(texts, kwargs, bad_id, message):
    with pytest.raises(CaptionError, match=message) as info:
        encode(_toy_vocab(), texts, max_len=5, **kwargs)
    assert info.value.caption_id == bad_id
    assert repr(bad_id) in str(info.value)


def test_encode_allows_all_unknown_when_asked():
    encoded = encode(_toy_vocab(), ["zebra giraffe"], max_len=5, allow_all_unknown=True)
    np.testing.assert_array_equal(encoded.ids[0], [2, 1, 1, 3, 0])


@pytest.mark.slow
def test_encode_100k_captions_quickly():
    vocab = _toy_vocab()
    texts = ["A dog runs after the cat, and the cat runs ."] * 100_000
    start = time.perf_counter()
    encoded = encode(vocab, texts, max_len=16)
    elapsed = time.perf_counter() - start
    assert encoded.ids.shape == (100_000, 16)
    assert elapsed < 10.0, f"encoding 100k captions took {elapsed:.1f}s"
