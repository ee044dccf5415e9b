"""Sentence embedders: anything that maps captions to vectors, evaluated the same way.

VTFN and every baseline end as an ``Embedder``; the evaluation harness only
calls ``embed(texts)``. A trained ``TokenEmbedder`` wraps an NNX module's
text tower with the vocabulary it was trained with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from capsim import text

EMBED_BATCH = 256
# Evaluation sentences (STS) can be longer than captions; longer ones are truncated.
EVAL_MAX_TOKENS = 64


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), D] sentence vectors (compared by cosine similarity)."""


@nnx.jit(static_argnums=0)
def _apply(fn: Callable, module: nnx.Module, ids: jax.Array, mask: jax.Array) -> jax.Array:
    return fn(module, ids, mask)


class TokenEmbedder:
    """Embeds raw text with a vocabulary and a ``fn(module, ids, mask) -> [B, D]``.

    Sentences are encoded in fixed-shape batches (one compilation) and
    out-of-vocabulary words map to ``<unk>``; an all-unknown sentence is allowed
    here because evaluation sets (STS) are not captions.
    """

    def __init__(self, module: nnx.Module, vocab: text.Vocab, fn: Callable):
        module.eval()
        self.module, self.vocab, self.fn = module, vocab, fn

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        encoded = text.encode(
            self.vocab, list(texts), EVAL_MAX_TOKENS, too_long="truncate", allow_all_unknown=True
        )
        out = []
        for start in range(0, len(texts), EMBED_BATCH):
            ids = np.zeros((EMBED_BATCH, EVAL_MAX_TOKENS), np.int32)
            mask = np.zeros((EMBED_BATCH, EVAL_MAX_TOKENS), bool)
            rows = encoded.ids[start : start + EMBED_BATCH]
            ids[: len(rows)] = rows
            mask[: len(rows)] = encoded.mask[start : start + EMBED_BATCH]
            mask[len(rows) :, 0] = True
            vectors = _apply(self.fn, self.module, jnp.asarray(ids), jnp.asarray(mask))
            out.append(np.asarray(vectors)[: len(rows)])
        return np.concatenate(out) if out else np.zeros((0, 0), np.float32)
