"""VTFN: a text tower aligned with frozen image features through a learned affine map.

Captions are encoded by any registered text encoder (BOW, GRU/LSTM, CNN) into
the N-d space; image features (frozen, optionally PCA-reduced) are mapped into
the same space by W. Training correlates cosine similarities of correct and
shuffled caption-image pairs with their ±1 labels (Pearson by default; any loss
of capsim.losses works). An optional pivot term aligns two captions of the same
image with the same loss; with no image term it is the CaptionPivot control.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from capsim import losses
from capsim.encoders import DEFAULT_DTYPE, PARAM_DTYPE, build_encoder, compute_dtype


class VTFN(nnx.Module):
    """Text encoder plus the affine image map W.

    ``model_config["dtype"]`` (default "float32") is the compute dtype of both
    towers' matmuls; parameters and the returned embeddings are float32.
    """

    def __init__(
        self,
        vocab_size: int,
        image_dim: int,
        model_config: Mapping,
        *,
        rngs: nnx.Rngs,
        embedding_init: np.ndarray | None = None,
    ):
        dtype = model_config.get("dtype", DEFAULT_DTYPE)
        spec = encoder_spec(model_config)
        dim = model_config["dim"]
        self.text = build_encoder(
            spec,
            vocab_size,
            embed_dim=dim if spec["kind"].startswith("bow") else model_config["embed_dim"],
            out_dim=dim,
            rngs=rngs,
            embedding_init=embedding_init,
            dtype=dtype,
        )
        self.image_map = nnx.Linear(
            image_dim, dim, dtype=compute_dtype(dtype), param_dtype=PARAM_DTYPE, rngs=rngs
        )

    def embed_text(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
        return self.text(ids, mask)

    def embed_image(self, features: jax.Array) -> jax.Array:
        return self.image_map(features).astype(jnp.float32)


LEGACY_CNN_KEYS = {"cnn_widths": "widths", "cnn_features": "features", "cnn_pooling": "pooling"}


def encoder_spec(model_config: Mapping) -> dict:
    """``model.encoder``: the text tower's kind and its own keys; every tower outputs N (``dim``).

    A BOW sentence vector lives in word-vector space, so its word vectors are N-d too.
    Workdirs written before the spec was a dict name the kind as a string, with the
    dropout and the ``cnn_*`` keys of every tower beside it; they load as the same model.
    """
    encoder = model_config["encoder"]
    if not isinstance(encoder, str):
        return dict(encoder)
    if encoder.startswith("bow"):
        return {"kind": encoder}
    spec = {"kind": encoder, "dropout": model_config["dropout"]}
    if encoder == "cnn":
        spec.update({new: model_config[old] for old, new in LEGACY_CNN_KEYS.items()})
    return spec


def build_model(
    config: ml_collections.ConfigDict,
    vocab_size: int,
    image_dim: int,
    embedding_init: np.ndarray | None = None,
) -> VTFN:
    return VTFN(
        vocab_size,
        image_dim,
        config.model,
        rngs=nnx.Rngs(params=config.seed, dropout=config.seed + 1),
        embedding_init=embedding_init,
    )


def _registry_loss(config: ml_collections.ConfigDict):
    name = config.loss.name
    hparams = {k: config.loss[k] for k in losses.loss_hparam_names(name)}
    fn = losses.get_loss(name)
    return lambda sim, positive, perm: fn(sim, positive, perm, **hparams)


def make_loss_fn(config: ml_collections.ConfigDict):
    """``loss_fn(model, batch, key)``: image_weight·L(text, image) + pivot_weight·L(text, text').

    Negatives are a random permutation of the batch (the paper's shuffled
    pairs); a permuted pair that shows the same image counts as correct.
    """
    loss = _registry_loss(config)
    image_weight = config.loss.image_weight
    pivot_weight = config.loss.pivot_weight
    if image_weight <= 0 and pivot_weight <= 0:
        raise ValueError("loss.image_weight and loss.pivot_weight are both 0: nothing to train")

    def loss_fn(model: VTFN, batch: Mapping[str, jax.Array], key: jax.Array):
        text = model.embed_text(batch["ids"], batch["mask"])
        group = batch["group"]
        positive = group[:, None] == group[None, :]
        perm = jax.random.permutation(key, group.shape[0])
        metrics, total = {}, jnp.zeros((), jnp.float32)
        if image_weight > 0:
            image = model.embed_image(batch["features"])
            image_loss = loss(losses.cosine_similarity_matrix(text, image), positive, perm)
            metrics["image_loss"] = image_loss
            total = total + image_weight * image_loss
        if pivot_weight > 0:
            other = model.embed_text(batch["pivot_ids"], batch["pivot_mask"])
            pivot_loss = loss(losses.cosine_similarity_matrix(text, other), positive, perm)
            metrics["pivot_loss"] = pivot_loss
            total = total + pivot_weight * pivot_loss
        return total, metrics

    return loss_fn
