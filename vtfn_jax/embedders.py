"""Sentence embedders: anything that maps captions to vectors, evaluated the same way.

VTFN and every baseline end as an ``Embedder``, the back end of
``vtfn_jax.SentenceEncoder``, which the evaluation harness calls. A trained
``TokenEmbedder`` wraps an NNX module's text tower with the vocabulary it was
trained with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from flax import nnx

from capsim import text
from capsim.embed import ModuleFn, embed_sentences, module_encoder

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
