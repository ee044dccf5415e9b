"""Sentence embedders: anything that maps captions to vectors, evaluated the same way.

VTFN and every baseline end as an ``Embedder``; the evaluation harness only
calls ``embed(texts)``. A trained ``TokenEmbedder`` wraps an NNX module's
text tower with the vocabulary it was trained with.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from flax import nnx

from capsim import text
from capsim.embed import ModuleFn, embed_sentences, module_encoder


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), D] sentence vectors (compared by cosine similarity)."""


class TokenEmbedder:
    """Embeds raw text with a vocabulary and a module-level ``fn(module, ids, mask) -> [B, D]``.

    Sentences go through capsim.embed's length-bucketed batches: no length
    limit, out-of-vocabulary words map to ``<unk>`` (evaluation sets such as
    STS are not captions), and an empty sentence gets the zero vector.
    """

    def __init__(self, module: nnx.Module, vocab: text.Vocab, fn: ModuleFn):
        self.module, self.vocab = module, vocab
        self._encode_batch = module_encoder(module, fn)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        embedded = embed_sentences(self._encode_batch, self.vocab, list(texts))
        if embedded.empty.size:
            logging.getLogger(__name__).info(
                "%d empty sentence(s) embed to zero", embedded.empty.size
            )
        return embedded.vectors
