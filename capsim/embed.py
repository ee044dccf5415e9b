"""Sentences to vectors in length-bucketed, fixed-shape batches.

Every model that turns free text into vectors (the I2CE scorer, sentence
encoders, dev evaluations) goes through ``embed_sentences``. Sentences are
padded to the smallest bucket that holds them: multiples of 4 tokens up to 32,
where captions live, then 48, 64, 96, 128, 192, 256, ... So a 200-token caption
works, and a short one pays for at most 3 padded steps (encoding time is linear
in the padded length). A bucket
runs full batches, then one last batch filled with dummy rows up to a power of
two: few shapes to compile, and little work on dummy rows (a fixed last batch
of ``batch_size`` rows wasted 27% of the work on Flickr8k-Expert, this one
11%: bench/RESULTS.md, "Scoring throughput"). A sentence's vector depends only on its own tokens, never on its
neighbours or the order of the call; a batch of another row count may round
differently, by about 1e-7 in float32.

Out-of-vocabulary words go through ``<unk>``. An empty or whitespace-only
sentence is not encoded: it gets a zero vector and its index is reported, so the
caller decides what it means (the I2CE scorer gives it 0.0).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from capsim import text
from capsim.encoders import RNNEncoder
from capsim.errors import CaptionError

# (ids [B, L] int32, mask [B, L] bool) -> vectors [B, D], given NumPy arrays; jit it, it is
# called once per batch.
EncodeBatch = Callable[[jax.Array, jax.Array], jax.Array]
# fn(module, ids, mask) -> vectors: what a model computes for a batch of sentences.
ModuleFn = Callable[[nnx.Module, jax.Array, jax.Array], jax.Array]

MIN_BUCKET = 8
FINE_STEP, FINE_LIMIT = 4, 32
# Rows of a batch times its bucket length stays at most batch_size * TOKEN_BUDGET_LENGTH,
# so long buckets run smaller batches instead of huge ones.
TOKEN_BUDGET_LENGTH = 64
MIN_ROWS = 8
IN_FLIGHT = 8


def _call_module(module: nnx.Module, ids: jax.Array, mask: jax.Array) -> jax.Array:
    return module(ids, mask)


@dataclasses.dataclass(frozen=True)
class _Structure:
    """A model's graphdef and function, the static argument of ``_apply``: hashed once, as
    hashing a GraphDef walks the whole graph (0.3 ms, on every call of the jit)."""

    graphdef: nnx.GraphDef
    fn: ModuleFn
    digest: int = dataclasses.field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", hash((self.graphdef, self.fn)))

    def __hash__(self) -> int:
        return self.digest


@functools.partial(jax.jit, static_argnums=0)
def _apply(structure: _Structure, state: nnx.State, ids: jax.Array, mask: jax.Array) -> jax.Array:
    return structure.fn(nnx.merge(structure.graphdef, state), ids, mask)


def module_encoder(module: nnx.Module, fn: ModuleFn = _call_module) -> EncodeBatch:
    """``encode_batch`` for an NNX model: jit-compiled ``fn(module, ids, mask)``.

    The module is put in eval mode, its RNN encoders unroll their time loops (inference runs
    1.5-1.7x faster so, capsim.recurrence.scan_rnn), and its current weights are captured,
    with its GRU encoders' input projections of every word as tables
    (``RNNEncoder.tabulate_inputs``; the module itself keeps none, so it trains as before);
    ``fn`` must be a module-level function (it is a static argument of the jit, so one
    compilation per bucket shape serves every model of the same structure).
    """
    module.eval()
    module.set_attributes(unroll=True, raise_if_not_found=False)  # RNN encoders: scan_rnn's
    encoders = [m for _, m in nnx.iter_modules(module) if isinstance(m, RNNEncoder)]
    tabulated = [m for m in encoders if m.tabulate_inputs()]
    graphdef, state = nnx.split(module)
    for encoder in tabulated:
        encoder.untabulate_inputs()
    return functools.partial(_apply, _Structure(graphdef, fn), state)


def bucket_length(num_tokens: int) -> int:
    """The padded length for a sentence of ``num_tokens`` ids (BOS/EOS included)."""
    if num_tokens <= FINE_LIMIT:
        return max(MIN_BUCKET, -(-num_tokens // FINE_STEP) * FINE_STEP)
    length = FINE_LIMIT
    while length < num_tokens:  # 32, 48, 64, 96, 128, ...: x1.5 from a power of two, else x4/3
        length += length // 2 if length & (length - 1) == 0 else length // 3
    return length


def rows_per_batch(length: int, batch_size: int) -> int:
    """Batch rows for a bucket: ``batch_size`` up to 64 tokens, fewer for longer buckets."""
    budget = batch_size * TOKEN_BUDGET_LENGTH
    return max(MIN_ROWS, min(batch_size, budget // length))


def tail_rows(count: int) -> int:
    """Rows of a bucket's last batch: ``count`` rounded up to a power of two, at least MIN_ROWS."""
    return max(MIN_ROWS, 1 << (count - 1).bit_length())


def sentence_ids(vocab: text.Vocab, sentence: object, sentence_id: object) -> Sequence[int] | None:
    """``<S> w1 .. wn </S>`` ids of one sentence, or None when it has no token.

    Non-strings and bytes that are not UTF-8 raise CaptionError naming the id.
    """
    if isinstance(sentence, bytes):
        try:
            sentence = sentence.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CaptionError(sentence_id, f"bytes are not valid UTF-8 ({error})") from error
    if not isinstance(sentence, str):
        raise CaptionError(sentence_id, f"caption must be a string, got {type(sentence).__name__}")
    return vocab.sentence_ids(sentence)


@dataclasses.dataclass
class Embedded:
    """Vectors [N, D] of the sentences, with zero rows at the ``empty`` indices."""

    vectors: np.ndarray
    empty: np.ndarray


def token_rows(
    vocab: text.Vocab, sentences: Sequence[object], ids: Sequence[object] | None = None
) -> list[Sequence[int] | None]:
    """``sentence_ids`` of each sentence; ``ids`` name them in errors (default: their index)."""
    if ids is not None and len(ids) != len(sentences):
        raise ValueError(f"got {len(ids)} ids for {len(sentences)} sentences")
    return [
        sentence_ids(vocab, s, ids[i] if ids is not None else i) for i, s in enumerate(sentences)
    ]


# The sentence indices of a batch's first rows, then its ids [B, L] and mask [B, L].
Batch = tuple[list[int], np.ndarray, np.ndarray]


def bucketed_batches(rows: Sequence[Sequence[int] | None], batch_size: int) -> Iterator[Batch]:
    """The padded batches of the non-empty ``rows``, bucket by bucket, shortest first."""
    by_bucket: dict[int, list[int]] = {}
    for index, row in enumerate(rows):
        if row is not None:
            by_bucket.setdefault(bucket_length(len(row)), []).append(index)
    lengths = np.array([0 if row is None else len(row) for row in rows], np.int64)
    starts = np.cumsum(lengths) - lengths  # of each row in ``flat``: rows filled by indexing
    flat = np.fromiter(itertools.chain.from_iterable(r for r in rows if r), np.int32)
    flat = np.append(flat, 0)  # read by every padded position
    for length in sorted(by_bucket):
        members = by_bucket[length]
        size = rows_per_batch(length, batch_size)
        for start in range(0, len(members), size):
            chunk = members[start : start + size]
            rows_here = min(size, tail_rows(len(chunk)))
            batch_mask = np.zeros((rows_here, length), bool)
            batch_mask[: len(chunk)] = np.arange(length) < lengths[chunk, None]
            batch_mask[len(chunk) :, 0] = True  # dummy rows hold one PAD token
            at = np.where(batch_mask[: len(chunk)], starts[chunk, None] + np.arange(length), -1)
            batch_ids = np.zeros((rows_here, length), np.int32)
            batch_ids[: len(chunk)] = flat[at]
            yield chunk, batch_ids, batch_mask


def encode_batches(
    encode_batch: EncodeBatch, batches: Iterable[Batch], count: int
) -> np.ndarray | None:
    """Vectors [count, D] with each batch's rows in place; None when there was no batch.

    Up to IN_FLIGHT batches are dispatched before the oldest result is read back:
    the device may run ahead of the host, and memory stays bounded on huge inputs.
    """
    vectors: np.ndarray | None = None
    pending: collections.deque[tuple[list[int], jax.Array]] = collections.deque()

    def collect() -> None:
        nonlocal vectors
        chunk, out = pending.popleft()
        out = np.asarray(out)
        if vectors is None:
            vectors = np.zeros((count, out.shape[-1]), out.dtype)
        vectors[chunk] = out[: len(chunk)]

    for chunk, batch_ids, batch_mask in batches:
        pending.append((chunk, encode_batch(batch_ids, batch_mask)))
        if len(pending) > IN_FLIGHT:
            collect()
    while pending:
        collect()
    return vectors


def embed_sentences(
    encode_batch: EncodeBatch,
    vocab: text.Vocab,
    sentences: Sequence[object],
    *,
    ids: Sequence[object] | None = None,
    batch_size: int = 256,
) -> Embedded:
    """Encodes ``sentences`` with ``encode_batch`` in length-bucketed batches.

    ``ids`` name the sentences in errors (default: their index).
    """
    rows = token_rows(vocab, sentences, ids)
    empty = np.array([i for i, row in enumerate(rows) if row is None], np.int64)
    vectors = encode_batches(encode_batch, bucketed_batches(rows, batch_size), len(sentences))
    if vectors is None:  # nothing but empty sentences: the encoder's width, without running it
        shape = jax.eval_shape(
            encode_batch,
            jax.ShapeDtypeStruct((MIN_ROWS, MIN_BUCKET), jnp.int32),
            jax.ShapeDtypeStruct((MIN_ROWS, MIN_BUCKET), jnp.bool_),
        )
        vectors = np.zeros((len(sentences), shape.shape[-1]), shape.dtype)
    return Embedded(vectors=vectors, empty=empty)
