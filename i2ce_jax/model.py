"""The I2CE GRU sentence autoencoder and its training objective.

The encoder (embedding -> GRU) reads a caption; its final hidden state is the
"intrinsic vector" that scoring compares. The decoder, used only in training,
is a GRU started from that vector that reconstructs the caption with teacher
forcing. Semantic branches add a loss over in-batch caption similarities, drawn
from the shared registry in capsim.losses, so any loss works here.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from capsim import losses
from capsim.encoders import DEFAULT_DTYPE, PARAM_DTYPE, RNNEncoder, compute_dtype, normal_embedding
from capsim.recurrence import scan_rnn

# Which caption the semantic loss compares each anchor with: "self" (the other
# anchors of the batch, the I2CE margin branch) or "similar" (a second caption
# of the anchor's image, the triplet/InfoNCE branches).
PAIRINGS = ("self", "similar")


class I2CEAutoencoder(nnx.Module):
    """GRU encoder-decoder sharing one word-embedding table.

    ``dtype`` is the compute dtype of the matmuls (capsim.encoders). The readout
    writes its logits in ``logits_dtype``: float32 (the default), or the compute dtype,
    which halves the traffic of the [B, T, V] logits while the matmul still accumulates
    in float32 (on GPUs and TPUs); the softmax and the NLL read them as float32 either
    way. ``decoder_unroll`` steps run per iteration of the decoder's time loop
    (capsim.recurrence.scan_rnn). Both are levers of issue 48 (bench/speed/step_levers.py).
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        embed_dim: int,
        hidden_dim: int,
        dropout: float = 0.0,
        rngs: nnx.Rngs,
        embedding_init: np.ndarray | None = None,
        dtype: str | jnp.dtype = DEFAULT_DTYPE,
        state_pooling: str = "last",
        bidirectional: bool = False,
        logits_dtype: str = "float32",
        decoder_unroll: int = 1,
    ):
        dtype = compute_dtype(dtype)
        if logits_dtype not in ("float32", dtype.name):
            raise ValueError(
                f"config.model.logits_dtype must be float32 or the compute dtype "
                f"({dtype.name}), got {logits_dtype!r}"
            )
        if decoder_unroll < 1:
            raise ValueError(f"config.model.decoder_unroll must be >= 1, got {decoder_unroll}")
        self.decoder_unroll = decoder_unroll
        self.encoder = RNNEncoder(
            vocab_size,
            embed_dim,
            hidden_dim,
            cell="gru",
            dropout=dropout,
            rngs=rngs,
            embedding_init=embedding_init,
            dtype=dtype,
            pooling=state_pooling,
            bidirectional=bidirectional,
        )
        kinds = dict(dtype=dtype, param_dtype=PARAM_DTYPE, rngs=rngs)
        self.decoder_cell = nnx.GRUCell(embed_dim, hidden_dim, **kinds)
        self.readout = nnx.Linear(
            hidden_dim, vocab_size, preferred_element_type=jnp.dtype(logits_dtype), **kinds
        )

    def encode(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
        """The intrinsic vectors [B, H] of a padded batch of captions."""
        return self.encoder(ids, mask)

    def reconstruction_nll(
        self, ids: jax.Array, mask: jax.Array, intrinsic: jax.Array
    ) -> jax.Array:
        """Per-token NLL of the caption given its intrinsic vector: summed over tokens, mean over batch.

        The decoder reads ``<S> w1 .. wn`` and predicts ``w1 .. wn </S>``.
        """
        inputs = self.encoder.embed(ids[:, :-1])
        _, outputs = scan_rnn(
            self.decoder_cell, inputs, mask[:, :-1], intrinsic, unroll=self.decoder_unroll
        )
        return sequence_nll(self.readout(outputs), ids[:, 1:], mask[:, 1:])


def sequence_nll(logits: jax.Array, targets: jax.Array, mask: jax.Array) -> jax.Array:
    """NLL of ``targets`` [B, T] under ``logits`` [B, T, V]: summed over real tokens, mean over B.

    optax's integer-label cross-entropy is logsumexp minus the target's logit, so
    no [B, T, V] log-softmax array is made (the hand-written twin it replaced was
    faster than a log-softmax in every round of bench/throughput.py's check). Logits of
    any dtype are read as float32 (the cast fuses into the reductions).
    """
    token_nll = optax.losses.softmax_cross_entropy_with_integer_labels(
        logits.astype(jnp.float32), targets
    )
    return jnp.mean(jnp.sum(token_nll * mask, axis=1))


def build_model(
    config: ml_collections.ConfigDict, vocab_size: int, embedding_init: np.ndarray | None = None
) -> I2CEAutoencoder:
    """The autoencoder of ``config.model``; word vectors from ``embedding_init`` (e.g. GloVe),
    else N(0, ``model.embed_std``²) when that is positive, else flax's default init.
    ``model.dtype`` (default "float32"; configs written before it lack it) is the compute dtype;
    ``model.state_pooling`` ("last", the paper's final state, or "mean" over the GRU states)
    makes the intrinsic vector, from a ``model.bidirectional`` GRU when that is set;
    ``model.logits_dtype`` and ``model.decoder_unroll`` as in ``I2CEAutoencoder``."""
    embed_std = config.model.get("embed_std", 0.0)
    if embedding_init is None and embed_std > 0:
        embedding_init = normal_embedding(
            vocab_size, config.model.embed_dim, embed_std, seed=config.seed
        )
    return I2CEAutoencoder(
        vocab_size,
        embed_dim=config.model.embed_dim,
        hidden_dim=config.model.hidden_dim,
        dropout=config.model.dropout,
        rngs=nnx.Rngs(params=config.seed, dropout=config.seed + 1),
        embedding_init=embedding_init,
        dtype=config.model.get("dtype", DEFAULT_DTYPE),
        state_pooling=config.model.get("state_pooling", "last"),
        bidirectional=config.model.get("bidirectional", False),
        logits_dtype=config.model.get("logits_dtype", "float32"),
        decoder_unroll=config.model.get("decoder_unroll", 1),
    )


def semantic_positives(
    batch: Mapping[str, jax.Array], pairing: str, single_captions: bool = False
) -> jax.Array:
    """[B, B] same-image mask of the semantic branch. ``group`` is the row's image, or
    ``-1 - image`` for a caption paired with itself (its image has no other caption,
    i2ce_jax.train.make_batch_fn): with the "similar" pairing and ``single_captions``
    that row is no positive of its own; it stays a negative of every other row.

    ``single_captions`` is False for corpora without such images, so their step keeps
    the program it had: the masked one put the 2-process gloo demo run out of step
    (a collective mismatch; docs/DEVELOPMENT_NOTES.md).
    """
    group = batch["group"]
    positive = group[:, None] == group[None, :]
    if pairing == "similar" and single_captions:
        positive &= ~jnp.eye(group.shape[0], dtype=bool) | (group >= 0)[:, None]
    return positive


def make_loss_fn(config: ml_collections.ConfigDict, single_captions: bool = False):
    """``loss_fn(model, batch, key)``: λ1·reconstruction + λ2·semantic loss.

    ``single_captions``: the corpus has images with one caption (see ``semantic_positives``).

    ``config.loss.name`` is "none" (one branch: reconstruction only) or any name
    in capsim.losses.LOSSES; its hyperparameters are read from ``config.loss``.
    """
    name = config.loss.name
    recon_weight = config.loss.recon_weight
    semantic_weight = config.loss.weight
    if name != "none" and config.loss.pairing not in PAIRINGS:
        raise ValueError(f"loss.pairing must be one of {PAIRINGS}, got {config.loss.pairing!r}")
    semantic = None if name == "none" else losses.get_loss(name)
    hparams = {} if name == "none" else {k: config.loss[k] for k in losses.loss_hparam_names(name)}
    pairing = config.loss.pairing
    contrast = config.loss.get("contrast", False)
    if contrast and (name != "infonce" or pairing != "similar"):
        raise ValueError(
            "config.loss.contrast (a word-swapped anchor as each row's own negative) needs "
            f"the infonce branch with the similar pairing, got {name!r} with {pairing!r}"
        )

    def loss_fn(model: I2CEAutoencoder, batch: Mapping[str, jax.Array], key: jax.Array):
        anchor = model.encode(batch["anchor_ids"], batch["anchor_mask"])
        recon = model.reconstruction_nll(batch["anchor_ids"], batch["anchor_mask"], anchor)
        metrics = {"recon_nll": recon}
        total = recon_weight * recon
        if semantic is not None:
            if pairing == "self":
                other = anchor
            else:
                other = model.encode(batch["similar_ids"], batch["similar_mask"])
            sim = losses.cosine_similarity_matrix(anchor, other)
            positive = semantic_positives(batch, pairing, single_captions)
            perm = jax.random.permutation(key, positive.shape[0])
            if contrast:
                swapped = model.encode(batch["contrast_ids"], batch["contrast_mask"])
                hard_sim = jnp.diagonal(losses.cosine_similarity_matrix(anchor, swapped))
                valid = jnp.any(batch["contrast_mask"], axis=1)
                semantic_loss = losses.infonce_loss(
                    sim, positive, hparams["temperature"], (hard_sim, valid)
                )
            else:
                semantic_loss = semantic(sim, positive, perm, **hparams)
            metrics["semantic"] = semantic_loss
            total = total + semantic_weight * semantic_loss
        return total, metrics

    return loss_fn
