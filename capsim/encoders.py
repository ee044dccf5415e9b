"""Flax NNX text encoders (BOW, GRU/LSTM, CNN) that map padded token ids to sentence vectors.

Every encoder is called as ``encoder(ids, mask)`` with ``ids`` int32 [B, L] and ``mask`` bool
[B, L] (True on real tokens) and returns float32 [B, encoder.out_dim]. PAD positions never reach
the output, so the same sentence padded to any length gives the same vector.

Mixed precision: ``dtype`` ("float32" or "bfloat16", ``config.model.dtype``) is the dtype that
matmuls and convolutions run in; parameters stay float32 (so Adam updates and checkpoints do not
change), recurrent states, pooling and norms are float32, and outputs are float32. Word vectors
are gathered from the float32 table and then cast (``Embed``), so no gradient is a bfloat16
scatter-add.

Dropout follows the NNX convention: modules start in training mode; call ``model.eval()`` (or
use ``nnx.view(model, deterministic=True)``) for deterministic inference and ``model.train()``
to switch back. Dropout keys come from the ``dropout`` stream of the ``rngs`` given at
construction, falling back to its ``default`` stream. An RNN encoder whose ``unroll`` is set
(capsim.embed.module_encoder sets it, for inference) unrolls a GRU's time loop
(capsim.recurrence.scan_rnn).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from capsim.recurrence import LSTM_CELL_TYPES, scan_rnn, zero_carry

Array = jax.Array

NORM_EPS = 1e-8
BOW_MODES = ("sum", "mean")
RNN_CELLS = ("gru", "lstm")
CNN_POOLINGS = ("max", "mean")
COMPUTE_DTYPES = ("float32", "bfloat16")
DEFAULT_DTYPE = "float32"
PARAM_DTYPE = jnp.float32


def _check_choice(kind: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"unknown {kind} {value!r}; valid choices: {list(choices)}")


def compute_dtype(dtype: str | jnp.dtype) -> np.dtype:
    """The dtype named by ``config.model.dtype`` (or given as a dtype), checked against
    ``COMPUTE_DTYPES``: float16 would need loss scaling, which the trainer does not do."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    _check_choice("compute dtype (config.model.dtype)", name, COMPUTE_DTYPES)
    return jnp.dtype(name)


class Embed(nnx.Embed):
    """``nnx.Embed`` that gathers rows of the float32 table, then casts only those to ``dtype``.

    ``nnx.Embed`` casts the whole table to ``dtype`` and gathers from the copy, so under
    bfloat16 the gradient is a bfloat16 scatter-add into a vocabulary-sized table: slow on
    GPUs (an H200 trained 4.5-15x slower in bfloat16 than in float32, issue 48) and rounded.
    Gathering first keeps the scatter-add float32 and casts only the [..., features] rows.
    The parameter (``embedding``, [num_embeddings, features], ``param_dtype``) is nnx.Embed's,
    so checkpoints and the packaged encoders load unchanged; ``attend`` (a matmul, no
    scatter) is nnx.Embed's too. Every embedding lookup of the library goes through here.
    """

    def __call__(self, inputs: Array, out_sharding=None) -> Array:
        if self.num_embeddings == 1:  # nnx.Embed broadcasts the one row: no gather
            return super().__call__(inputs, out_sharding)
        if not jnp.issubdtype(inputs.dtype, jnp.integer):
            raise ValueError(f"Embed takes integer ids, got {inputs.dtype}")

        def take(table: Array, ids: Array) -> Array:
            return jnp.take(table, ids, axis=0)

        if out_sharding is not None:  # as nnx.Embed: jnp.take takes no out_sharding
            take = jax.sharding.auto_axes(out_sharding=out_sharding)(take)
        return take(self.embedding[...], inputs).astype(self.dtype)


def _make_embed(
    vocab_size: int,
    embed_dim: int,
    embedding_init: np.ndarray | None,
    rngs: nnx.Rngs,
    dtype: np.dtype,
) -> Embed:
    """A word-vector table, optionally started from pretrained vectors (e.g. GloVe)."""
    kinds = dict(dtype=dtype, param_dtype=PARAM_DTYPE)
    if embedding_init is None:
        return Embed(vocab_size, embed_dim, rngs=rngs, **kinds)
    table = np.asarray(embedding_init, np.float32)
    if table.shape != (vocab_size, embed_dim):
        raise ValueError(
            f"embedding_init has shape {table.shape}, expected (vocab_size, embed_dim) = "
            f"({vocab_size}, {embed_dim})"
        )
    if not np.all(np.isfinite(table)):
        raise ValueError("embedding_init contains NaN or infinite values")
    return Embed(
        vocab_size,
        embed_dim,
        embedding_init=lambda key, shape, dtype: jnp.asarray(table, dtype),
        rngs=rngs,
        **kinds,
    )


def normal_embedding(vocab_size: int, embed_dim: int, std: float, seed: int) -> np.ndarray:
    """A ``[vocab_size, embed_dim]`` N(0, std²) table with a zero PAD row (row 0).

    flax's default embedding init has std 1/sqrt(embed_dim); I2CE's GRU autoencoders
    learn far faster from N(0, 1) word vectors (bench/RESULTS.md), so models can ask
    for this table as ``embedding_init``.
    """
    table = np.random.default_rng(seed).normal(0.0, std, (vocab_size, embed_dim))
    table[0] = 0.0
    return table.astype(np.float32)


def _embed_masked(embed: Embed, ids: Array, mask: Array) -> Array:
    """Word vectors [B, L, E] (compute dtype) with PAD positions zeroed, whatever row PAD is."""
    vectors = embed(ids)
    return vectors * mask[..., None].astype(vectors.dtype)


class BowEncoder(nnx.Module):
    """VTFN's bag of words over the real tokens of each caption.

    ``mode="sum"`` returns the L2-normalised sum of word vectors (unit norm; a caption with no
    real token gives the zero vector). ``mode="mean"`` returns the plain average: normalising it
    would reproduce the sum variant exactly, so the mean keeps its length (GloVe-average style).
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        *,
        mode: str = "sum",
        rngs: nnx.Rngs,
        embedding_init: np.ndarray | None = None,
        dtype: str | jnp.dtype = DEFAULT_DTYPE,
    ):
        _check_choice("BOW mode", mode, BOW_MODES)
        self.mode = mode
        self.out_dim = embed_dim
        self.embed = _make_embed(vocab_size, embed_dim, embedding_init, rngs, compute_dtype(dtype))

    def __call__(self, ids: Array, mask: Array) -> Array:
        vectors = _embed_masked(self.embed, ids, mask).astype(jnp.float32)
        total = jnp.sum(vectors, axis=1)
        if self.mode == "mean":
            count = jnp.sum(mask, axis=1, keepdims=True).astype(jnp.float32)
            return total / jnp.maximum(count, 1.0)
        norm_sq = jnp.sum(total * total, axis=-1, keepdims=True)
        return total / jnp.sqrt(jnp.maximum(norm_sq, NORM_EPS * NORM_EPS))


RNN_POOLINGS = ("last", "mean")
# Entries of one inference input table (RNNEncoder.tabulate_inputs) at most: 128 MiB in
# float32, e.g. 40,000 words for a GRU of 256 units; a larger one keeps the matmul.
MAX_INPUT_TABLE = 1 << 25


class RNNEncoder(nnx.Module):
    """GRU or LSTM encoder; the sentence vector is the hidden state after the last real token
    (``pooling="last"``) or the mean of the hidden states over the real tokens (``"mean"``).

    ``bidirectional`` splits ``hidden_dim`` between a forward cell and a backward one that
    reads the real tokens last to first; the sentence vector concatenates the two. Each cell
    is half as wide, so it costs about what one direction of ``hidden_dim`` does.

    Dropout (rate ``dropout``) is applied to the word vectors before the recurrence. The state
    is carried in float32 whatever the compute dtype: each step's gate matmuls round to
    ``dtype``, the update ``(1 - z) * n + z * h`` promotes back to float32, so rounding does not
    accumulate over time.

    For inference, ``tabulate_inputs`` stores a GRU's input projection of every word (its
    ``cell.dense_i`` of the word's vector, [V, 3H]): a batch then gathers rows instead of
    multiplying [B·L, E] by [E, 3H], 16% of the packaged I2CE encoders' work.
    ``capsim.embed.module_encoder`` uses it on the copy it compiles, never on a model in training.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_dim: int,
        *,
        cell: str = "gru",
        dropout: float = 0.0,
        rngs: nnx.Rngs,
        embedding_init: np.ndarray | None = None,
        dtype: str | jnp.dtype = DEFAULT_DTYPE,
        pooling: str = "last",
        bidirectional: bool = False,
    ):
        _check_choice("RNN cell", cell, RNN_CELLS)
        _check_choice("RNN pooling", pooling, RNN_POOLINGS)
        if bidirectional and hidden_dim % 2:
            raise ValueError(f"a bidirectional RNN splits hidden_dim in two; got {hidden_dim}")
        dtype = compute_dtype(dtype)
        self.out_dim = hidden_dim
        self.pooling = pooling
        self.unroll = False  # unroll the time loop (scan_rnn): inference sets it, training not
        self.embed = _make_embed(vocab_size, embed_dim, embedding_init, rngs, dtype)
        self.dropout = nnx.Dropout(dropout, rngs=rngs)
        cell_type = nnx.GRUCell if cell == "gru" else nnx.OptimizedLSTMCell
        width = hidden_dim // 2 if bidirectional else hidden_dim
        kinds = dict(dtype=dtype, param_dtype=PARAM_DTYPE, rngs=rngs)
        self.cell = cell_type(embed_dim, width, **kinds)
        self.backward_cell = cell_type(embed_dim, width, **kinds) if bidirectional else None
        # tabulate_inputs(); None in training. Data attributes, so a table can take their place.
        self.input_table: nnx.Cache | None = nnx.data(None)
        self.backward_input_table: nnx.Cache | None = nnx.data(None)

    def tabulate_inputs(self) -> bool:
        """Stores each GRU cell's input projection of every word, from the current weights, and
        says whether it did (an LSTM, or a table over MAX_INPUT_TABLE entries, keeps the
        matmul). The same rows as the matmul, bit for bit on the packaged I2CE encoders
        (tests/test_long_captions.py); ``untabulate_inputs`` drops them."""
        if not isinstance(self.cell, nnx.GRUCell):
            return False
        if self.embed.num_embeddings * self.cell.dense_i.out_features > MAX_INPUT_TABLE:
            return False
        words = self.embed(jnp.arange(self.embed.num_embeddings))
        self.input_table = nnx.Cache(self.cell.dense_i(words))
        if self.backward_cell is not None:
            self.backward_input_table = nnx.Cache(self.backward_cell.dense_i(words))
        return True

    def untabulate_inputs(self) -> None:
        self.input_table = self.backward_input_table = None

    def _read(self, cell: nnx.Module, inputs: Array, mask: Array, projected: bool) -> Array:
        """One direction's sentence vector [B, H] (``pooling``) over the masked ``inputs``."""
        start = zero_carry(cell, inputs.shape[0])
        final_carry, outputs = scan_rnn(
            cell, inputs, mask, start, unroll=self.unroll, projected=projected
        )
        if self.pooling == "mean":  # outputs are zero at masked steps
            count = jnp.maximum(jnp.sum(mask, axis=1, keepdims=True), 1)
            return jnp.sum(outputs, axis=1) / count
        if isinstance(cell, LSTM_CELL_TYPES):
            _, hidden = final_carry
            return hidden
        return final_carry

    def __call__(self, ids: Array, mask: Array) -> Array:
        projected = self.input_table is not None
        if projected:  # masked steps leave the carry as it is: PAD's row never reaches the output
            inputs = self.input_table[...][ids]
        else:
            inputs = self.dropout(_embed_masked(self.embed, ids, mask))
        forward = self._read(self.cell, inputs, mask, projected)
        if self.backward_cell is None:
            return forward
        if projected:
            inputs = self.backward_input_table[...][ids]
        # Reversed in time, padding comes first; masked steps leave the carry as it is.
        backward = self._read(self.backward_cell, inputs[:, ::-1], mask[:, ::-1], projected)
        return jnp.concatenate([forward, backward], axis=-1)


class CNNEncoder(nnx.Module):
    """Convolutions of several widths, masked pooling over time, then a dense layer.

    Each width gives one ReLU feature map with one window per token position ("SAME" padding over
    PAD-zeroed word vectors, so a caption shorter than the width still has windows). Pooling runs
    over real positions only ("max" masks PAD with -inf); the pooled maps are concatenated, pass
    through dropout, and a dense layer maps them to ``out_dim``.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        *,
        widths: Sequence[int] = (1, 2, 3),
        features: int = 128,
        pooling: str = "max",
        out_dim: int = 128,
        dropout: float = 0.0,
        rngs: nnx.Rngs,
        embedding_init: np.ndarray | None = None,
        dtype: str | jnp.dtype = DEFAULT_DTYPE,
    ):
        _check_choice("CNN pooling", pooling, CNN_POOLINGS)
        if not widths or any(int(w) < 1 for w in widths):
            raise ValueError(f"CNN widths must be a non-empty list of positive ints, got {widths}")
        dtype = compute_dtype(dtype)
        kinds = dict(dtype=dtype, param_dtype=PARAM_DTYPE, rngs=rngs)
        self.pooling = pooling
        self.out_dim = out_dim
        self.embed = _make_embed(vocab_size, embed_dim, embedding_init, rngs, dtype)
        self.convs = nnx.List(
            [
                nnx.Conv(embed_dim, features, kernel_size=(int(w),), padding="SAME", **kinds)
                for w in widths
            ]
        )
        self.dropout = nnx.Dropout(dropout, rngs=rngs)
        self.dense = nnx.Linear(features * len(widths), out_dim, **kinds)

    def _pool(self, feature_map: Array, mask: Array) -> Array:
        feature_map = feature_map.astype(jnp.float32)
        valid = mask[..., None]
        if self.pooling == "mean":
            count = jnp.sum(mask, axis=1, keepdims=True).astype(jnp.float32)
            return jnp.sum(jnp.where(valid, feature_map, 0.0), axis=1) / jnp.maximum(count, 1.0)
        pooled = jnp.max(jnp.where(valid, feature_map, -jnp.inf), axis=1)
        return jnp.where(jnp.any(mask, axis=1, keepdims=True), pooled, 0.0)

    def __call__(self, ids: Array, mask: Array) -> Array:
        embedded = _embed_masked(self.embed, ids, mask)
        pooled = [self._pool(nnx.relu(conv(embedded)), mask) for conv in self.convs]
        return self.dense(self.dropout(jnp.concatenate(pooled, axis=-1))).astype(jnp.float32)


ENCODER_KINDS = ("bow_sum", "bow_mean", "gru", "lstm", "cnn")


def build_encoder(
    spec: Mapping[str, Any],
    vocab_size: int,
    *,
    embed_dim: int,
    out_dim: int,
    rngs: nnx.Rngs,
    embedding_init: np.ndarray | None = None,
    dtype: str | jnp.dtype = DEFAULT_DTYPE,
) -> nnx.Module:
    """The encoder ``spec`` names: ``kind`` plus that encoder's own keyword arguments.

    ``spec`` is ``config.model.encoder`` as it is, e.g. ``{"kind": "gru", "dropout": 0.2}``
    or ``{"kind": "cnn", "widths": (1, 2, 3), "features": 128, "pooling": "max"}``; the
    sizes every tower shares (word vectors, output) come from the model. A BOW sentence
    vector lives in word-vector space, so its ``out_dim`` must equal ``embed_dim``.
    """
    own = dict(spec)
    kind = own.pop("kind", None)
    if kind not in ENCODER_KINDS:
        raise KeyError(f"unknown encoder kind {kind!r}; valid kinds: {list(ENCODER_KINDS)}")
    shared = dict(rngs=rngs, embedding_init=embedding_init, dtype=dtype)
    if kind.startswith("bow_"):
        if out_dim != embed_dim:
            raise ValueError(f"{kind}: out_dim {out_dim} must equal embed_dim {embed_dim}")
        build, args, set_here = BowEncoder, (vocab_size, embed_dim), {"mode": kind[4:]}
    elif kind in RNN_CELLS:
        build, args, set_here = RNNEncoder, (vocab_size, embed_dim, out_dim), {"cell": kind}
    else:
        build, args, set_here = CNNEncoder, (vocab_size, embed_dim), {"out_dim": out_dim}
    named = set(inspect.signature(build.__init__).parameters) - set(shared) - set(set_here)
    allowed = named - {"self", "vocab_size", "embed_dim", "hidden_dim"}
    unknown = sorted(set(own) - allowed)
    if unknown:
        raise KeyError(f"encoder {kind!r} takes no {unknown}; its keys: {sorted(allowed)}")
    return build(*args, **own, **set_here, **shared)
