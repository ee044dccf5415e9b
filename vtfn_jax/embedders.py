"""Sentence embedders: anything that maps captions to vectors, evaluated the same way.

VTFN and every baseline end as an ``Embedder``, the back end of
``vtfn_jax.SentenceEncoder``, which the evaluation harness calls. A trained
``TokenEmbedder`` wraps an NNX module's text tower with the vocabulary it was
trained with.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from flax import nnx

from capsim import text
from capsim.embed import ModuleFn, embed_sentences, module_encoder
from capsim.errors import CaptionError
from capsim.progress import Progress

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 256


class Embedder(Protocol):
    def embed(self, texts: Sequence[str], batch_size: int = DEFAULT_BATCH_SIZE) -> np.ndarray:
        """[len(texts), D] sentence vectors (compared by cosine similarity), zero rows for
        sentences without a token. ``batch_size`` bounds the rows a device batch holds;
        the vectors never depend on it."""


class TokenEmbedder:
    """Embeds raw text with a vocabulary and a module-level ``fn(module, ids, mask) -> [B, D]``.

    Sentences go through capsim.embed's length-bucketed batches: no length
    limit, out-of-vocabulary words map to ``<unk>`` (evaluation sets such as
    STS are not captions), and an empty sentence gets the zero vector.
    """

    def __init__(self, module: nnx.Module, vocab: text.Vocab, fn: ModuleFn):
        self.module, self.vocab = module, vocab
        self._encode_batch = module_encoder(module, fn)

    def embed(self, texts: Sequence[str], batch_size: int = DEFAULT_BATCH_SIZE) -> np.ndarray:
        return embed_sentences(
            self._encode_batch, self.vocab, list(texts), batch_size=batch_size
        ).vectors


# Sentences per call of the embedder: batch_size times this. Progress is reported between calls.
CHUNK_BATCHES = 64


def encode_sentences(
    embedder: Embedder,
    sentences: str | Sequence[str],
    batch_size: int = 64,
    normalize_embeddings: bool = False,
    show_progress_bar: bool | None = None,
) -> np.ndarray:
    """``SentenceEncoder.encode`` of an embedder: the one path every evaluation embeds by.

    Sentences are checked (strings only, CaptionError naming the index), sorted by
    length into chunks of ``batch_size * CHUNK_BATCHES`` so few bucket batches run
    part-filled, and embedded chunk by chunk with progress between chunks.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    single = isinstance(sentences, str)
    texts = [sentences] if single else list(sentences)
    for index, sentence in enumerate(texts):
        if not isinstance(sentence, str):
            raise CaptionError(index, f"must be a string, got {type(sentence).__name__}")
    lengths = np.array([len(text.tokenize(sentence)) for sentence in texts], np.int64)
    empty = int(np.sum(lengths == 0))
    if empty:
        logger.info("%d of %d sentences are empty: zero vectors", empty, len(texts))
    # Similar lengths share a chunk, so few of its bucket batches run part-filled.
    order = np.argsort(lengths, kind="stable")
    chunks = np.array_split(order, max(1, math.ceil(len(texts) / (batch_size * CHUNK_BATCHES))))
    if show_progress_bar is None:
        show_progress_bar = len(chunks) > 1 and logger.isEnabledFor(logging.INFO)
    progress = Progress(len(texts), unit="sentences", item="sentences", prefix="encode: ")
    vectors, done = None, 0
    for number, chunk in enumerate(chunks, start=1):
        out = np.asarray(embedder.embed([texts[i] for i in chunk], batch_size=batch_size))
        if vectors is None:
            vectors = np.zeros((len(texts), out.shape[1]), out.dtype)
        vectors[chunk], done = out, done + len(chunk)
        if show_progress_bar:
            progress.report(done, final=number == len(chunks))
    if normalize_embeddings:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms > 0, norms, 1)
    return vectors[0] if single else vectors
