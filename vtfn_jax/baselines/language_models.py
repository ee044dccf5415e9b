"""Caption language models: PureTextRNN and PinModelA (Mao et al., 2016), one GRU module.

Both are GRU language models over captions (teacher forcing, per-token NLL).
PureTextRNN starts from a zero state; PinModelA starts from ``tanh(W f + b)``
of the caption's image feature ``f``, so the images shape what the GRU learns.

The sentence embedding of both is the GRU state after the last word (the state
that predicts ``</S>``), run from the zero state. For PinModelA that means no
image at evaluation time: the test sentences (STS, held-out captions) have none,
and the paper compares text-only embeddings.

Training is a capsim.task.Task that the shared recipe runs on the harness's training captions
(``data.splits["train"]``, so ``captions_per_image`` applies as for VTFN), with
checkpoints and early stopping on the dev same-image AUC, as VTFN does; the dev
perplexity is logged beside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from capsim.checkpoints import restore_model
from capsim.data import glove
from capsim.data.corpus import CaptionSplit
from capsim.data.device_tables import rows_key
from capsim.data.pipeline import Batches
from capsim.encoders import DEFAULT_DTYPE, PARAM_DTYPE, RNNEncoder, compute_dtype
from capsim.eval.evaluators import Subject
from capsim.recurrence import scan_rnn, zero_carry
from capsim.task import Task
from capsim.text import EOS_ID
from vtfn_jax.data import VtfnData
from vtfn_jax.embedders import TokenEmbedder

EVAL_BATCH = 256


def reading_mask(ids: jax.Array, mask: jax.Array) -> jax.Array:
    """The positions the GRU reads: ``<S>`` and the words, not ``</S>`` (nothing follows it)."""
    return mask & (ids != EOS_ID)


class CaptionLanguageModel(nnx.Module):
    """Word vectors -> GRU -> next-token logits; with ``image_dim``, PinModelA's image start.

    ``dtype`` is the compute dtype of the matmuls (capsim.encoders); parameters, the GRU
    state and the logits (so the softmax and the NLL) are float32 in any dtype.
    """

    def __init__(
        self,
        vocab_size: int,
        embed_dim: int,
        hidden_dim: int,
        *,
        image_dim: int | None = None,
        dropout: float = 0.0,
        rngs: nnx.Rngs,
        embedding_init: np.ndarray | None = None,
        dtype: str | jnp.dtype = DEFAULT_DTYPE,
    ):
        dtype = compute_dtype(dtype)
        # The encoder holds the word vectors (GloVe init), dropout and GRU cell; the language
        # model drives them itself because it needs every step's output and its own start state.
        self.rnn = RNNEncoder(
            vocab_size,
            embed_dim,
            hidden_dim,
            cell="gru",
            dropout=dropout,
            rngs=rngs,
            embedding_init=embedding_init,
            dtype=dtype,
        )
        kinds = dict(
            dtype=dtype, param_dtype=PARAM_DTYPE, preferred_element_type=jnp.float32, rngs=rngs
        )
        self.image_init = nnx.Linear(image_dim, hidden_dim, **kinds) if image_dim else None
        self.output = nnx.Linear(hidden_dim, vocab_size, **kinds)

    def _start(self, batch_size: int, features: jax.Array | None) -> jax.Array:
        if features is None:
            return zero_carry(self.rnn.cell, batch_size)
        if self.image_init is None:
            raise ValueError("this language model has no image projection; pass features=None")
        return jnp.tanh(self.image_init(features))

    def _run(self, ids: jax.Array, reading: jax.Array, features: jax.Array | None):
        vectors = self.rnn.embed(ids)
        inputs = self.rnn.dropout(vectors * reading[..., None].astype(vectors.dtype))
        return scan_rnn(self.rnn.cell, inputs, reading, self._start(ids.shape[0], features))

    def next_token_logits(
        self, ids: jax.Array, mask: jax.Array, features: jax.Array | None = None
    ) -> jax.Array:
        """[B, L-1, V]: logits at position t predict ``ids[:, t + 1]``."""
        _, outputs = self._run(ids[:, :-1], reading_mask(ids, mask)[:, :-1], features)
        return self.output(outputs)

    def embed_text(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
        """[B, H]: the state after the last word, from the zero state (never an image)."""
        final_state, _ = self._run(ids, reading_mask(ids, mask), None)
        return final_state


def token_nll(
    model: CaptionLanguageModel, ids: jax.Array, mask: jax.Array, features: jax.Array | None
) -> tuple[jax.Array, jax.Array]:
    """Summed next-token NLL over the real targets (words and ``</S>``) and their count."""
    logits = model.next_token_logits(ids, mask, features)
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, ids[:, 1:])
    targets = mask[:, 1:].astype(jnp.float32)
    return jnp.sum(nll * targets), jnp.sum(targets)


def make_lm_loss(with_image: bool):
    """``loss_fn(model, batch, key)``: mean NLL per target token (dropout keys live in the model)."""

    def loss_fn(model: CaptionLanguageModel, batch: Mapping[str, jax.Array], key: jax.Array):
        features = batch["features"] if with_image else None
        total, count = token_nll(model, batch["ids"], batch["mask"], features)
        loss = total / jnp.maximum(count, 1.0)
        return loss, {"perplexity": jnp.exp(loss)}

    return loss_fn


@nnx.jit
def _nll_batch(model, ids, mask, features):
    return token_nll(model, ids, mask, features)


def perplexity(model: CaptionLanguageModel, split: CaptionSplit, with_image: bool) -> float:
    """Per-token perplexity of a split's captions (with their images for PinModelA)."""
    corpus = split.corpus
    total, count = 0.0, 0.0
    for start in range(0, len(corpus), EVAL_BATCH):
        rows = np.arange(start, min(start + EVAL_BATCH, len(corpus)))
        ids = np.zeros((EVAL_BATCH, corpus.ids.shape[1]), np.int32)
        mask = np.zeros(ids.shape, bool)
        ids[: len(rows)], mask[: len(rows)] = corpus.ids[rows], corpus.mask[rows]
        features = None
        if with_image:
            features = np.zeros((EVAL_BATCH, split.features.shape[1]), np.float32)
            features[: len(rows)] = split.features[corpus.image_index[rows]]
        batch_total, batch_count = _nll_batch(model, ids, mask, features)
        total, count = total + float(batch_total), count + float(batch_count)
    return math.exp(total / max(count, 1.0))


def _embed_text(model: CaptionLanguageModel, ids, mask):
    return model.embed_text(ids, mask)


def text_embedder(model: CaptionLanguageModel, data: VtfnData) -> TokenEmbedder:
    return TokenEmbedder(model, data.vocab, _embed_text)


def subject_of(model: CaptionLanguageModel, data: VtfnData, with_image: bool) -> Subject:
    """The language model as the evaluators see it: text embedding and dev perplexity."""
    return Subject(
        embed=text_embedder(model, data).embed,
        perplexity=lambda split: perplexity(model, split, with_image),
        splits=data.splits,
        world=data.world,
    )


def build_language_model(
    config: ml_collections.ConfigDict, data: VtfnData, with_image: bool
) -> CaptionLanguageModel:
    """Sizes from config.model: embed_dim (word vectors), dim (GRU state = sentence vector);
    ``model.dtype`` (default "float32") is the compute dtype."""
    model_config = config.model
    init = glove.initial_word_vectors(config, data.vocab)
    return CaptionLanguageModel(
        len(data.vocab),
        model_config.embed_dim,
        model_config.dim,
        image_dim=data.image_dim if with_image else None,
        dropout=model_config.dropout,
        rngs=nnx.Rngs(params=config.seed, dropout=config.seed + 1),
        embedding_init=init,
        dtype=model_config.get("dtype", DEFAULT_DTYPE),
    )


def make_batch_fn(split: CaptionSplit, with_image: bool):
    """Captions; for PinModelA with their images' feature rows (``features_rows``, indices
    into the ``features`` table of ``training_batches``)."""
    corpus = split.corpus

    def make_batch(
        rows: np.ndarray, draws: np.ndarray, width: int | None = None
    ) -> dict[str, np.ndarray]:
        ids, mask = corpus.tokens(rows, width)
        batch = {"ids": ids, "mask": mask}
        if with_image:
            batch[rows_key("features")] = corpus.image_index[rows].astype(np.int32)
        return batch

    return make_batch


def training_batches(split: CaptionSplit, with_image: bool, length_buckets: int = 0) -> Batches:
    """The training captions' batches; PinModelA's index the image features as a table
    (capsim.data.device_tables), kept on the device when it fits."""
    return Batches(
        len(split.corpus),
        make_batch_fn(split, with_image),
        length_buckets=split.corpus.length_buckets(length_buckets),
        tables={"features": split.features} if with_image else None,
    )


def task(config: ml_collections.ConfigDict, data: VtfnData, with_image: bool) -> Task:
    """The language model on the training captions (with their images for PinModelA);
    the dev evaluators see its perplexity too, and results.json its best dev perplexity."""
    train = data.splits["train"]
    metric = config.early_stopping.metric

    def summarize(result) -> dict:
        # A resumed, already finished run has no history of its own, hence the default.
        best = next((e for e in result.eval_history if e[metric] == result.best_metric), {})
        return {
            **result.summary(),
            "dev_perplexity": best.get("dev_perplexity/perplexity"),
            "last_train_loss": result.last_loss,
        }

    return Task(
        subject_of=lambda model: subject_of(model, data, with_image),
        model=build_language_model(config, data, with_image),
        loss_fn=make_lm_loss(with_image),
        batches=training_batches(train, with_image, config.data.get("length_buckets", 0)),
        summarize=summarize,
    )


def load(
    config: ml_collections.ConfigDict, workdir: Path, data: VtfnData, with_image: bool
) -> CaptionLanguageModel:
    model = build_language_model(config, data, with_image)
    restore_model(workdir, model)
    return model


def embedders(model: CaptionLanguageModel, data: VtfnData) -> tuple[TokenEmbedder, None]:
    """The final state's text embedding; no image tower."""
    return text_embedder(model, data), None
