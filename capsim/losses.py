"""Similarity losses shared by VTFN and I2CE: pure, jit-friendly functions plus a name registry.

Core functions work on plain arrays. The registry (``LOSSES``) wraps each one behind a single
signature, ``fn(sim, positive, perm, **hparams) -> scalar``, so any loss can train any model:

- ``sim[i, j]``: similarity of query ``i`` (a caption) and target ``j`` (an image or a caption);
- ``positive[i, j]``: True when both describe the same image. The diagonal is True but for a
  row with no real positive (I2CE pairs a caption whose image has no other with itself): the
  losses that read the diagonal as the positive pair then leave that row's pair out;
- ``perm``: a random permutation of ``range(B)`` giving each row one shuffled negative, as in
  the VTFN paper.

All arithmetic is float32. Every division by a norm, a standard deviation or a count is guarded,
so degenerate batches give finite values and finite gradients instead of NaN.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import jax
import jax.numpy as jnp

DEFAULT_EPS = 1e-8
DEFAULT_MARGIN = 0.2
DEFAULT_TEMPERATURE = 0.05
# A logit that takes no share of a softmax (finite: -inf would turn a row's 0 * log p into NaN).
NO_LOGIT = -1e9
# The surrogate Kendall tau's sharpness; the papers tune it, 1.0 is a neutral starting point.
DEFAULT_KENDALL_ALPHA = 1.0
MARGIN_REDUCTIONS = ("mean", "max")

Array = jax.Array
LossFn = Callable[..., Array]


def _as_f32(x: Array) -> Array:
    return jnp.asarray(x, jnp.float32)


def _safe_sqrt_floor(sq: Array, floor: float) -> Array:
    """sqrt(max(sq, floor**2)) == max(sqrt(sq), floor), with a finite gradient at sq == 0."""
    return jnp.sqrt(jnp.maximum(sq, floor * floor))


def _masked_mean(values: Array, mask: Array) -> Array:
    """Mean of ``values`` where ``mask``; 0 when nothing is selected (never 0/0)."""
    mask = mask.astype(jnp.float32)
    return jnp.sum(values * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def cosine_similarity_matrix(a: Array, b: Array, eps: float = DEFAULT_EPS) -> Array:
    """[B, D] x [C, D] -> [B, C] cosine similarities; a zero vector gets similarity 0, not NaN."""
    a, b = _as_f32(a), _as_f32(b)
    a_norm = _safe_sqrt_floor(jnp.sum(a * a, axis=-1, keepdims=True), eps)
    b_norm = _safe_sqrt_floor(jnp.sum(b * b, axis=-1, keepdims=True), eps)
    return (a / a_norm) @ (b / b_norm).T


def pearson_correlation(x: Array, y: Array, eps: float = DEFAULT_EPS) -> Array:
    """Pearson r of two 1-D vectors; a constant vector gives r = 0 with finite gradients."""
    x, y = _as_f32(x), _as_f32(y)
    xc = x - jnp.mean(x)
    yc = y - jnp.mean(y)
    x_std = _safe_sqrt_floor(jnp.mean(xc * xc), eps)
    y_std = _safe_sqrt_floor(jnp.mean(yc * yc), eps)
    return jnp.mean(xc * yc) / (x_std * y_std)


def pearson_loss(x: Array, y: Array) -> Array:
    """Negative Pearson correlation (VTFN's main loss)."""
    return -pearson_correlation(x, y)


def covariance_loss(x: Array, y: Array) -> Array:
    """Negative population covariance (mean over items): Pearson without the scale invariance."""
    x, y = _as_f32(x), _as_f32(y)
    return -jnp.mean((x - jnp.mean(x)) * (y - jnp.mean(y)))


def kendall_surrogate(x: Array, y: Array, alpha: float = DEFAULT_KENDALL_ALPHA) -> Array:
    """Differentiable Kendall tau: mean over pairs i < j of tanh(alpha (x_i - x_j)(y_i - y_j)).

    ``alpha > 0`` sets how closely tanh approximates the sign of the concordance.
    """
    x, y = _as_f32(x), _as_f32(y)
    n = x.shape[0]
    concordance = jnp.tanh(alpha * (x[:, None] - x[None, :]) * (y[:, None] - y[None, :]))
    upper = jnp.triu(jnp.ones((n, n), jnp.bool_), k=1)
    return jnp.sum(jnp.where(upper, concordance, 0.0)) / max(n * (n - 1) / 2, 1)


def kendall_loss(x: Array, y: Array, alpha: float = DEFAULT_KENDALL_ALPHA) -> Array:
    """Negative surrogate Kendall tau."""
    return -kendall_surrogate(x, y, alpha)


def margin_loss(
    sim: Array, negative_mask: Array, margin: float = DEFAULT_MARGIN, reduction: str = "mean"
) -> Array:
    """I2CE dual-branch loss: push negatives at least ``margin`` apart in cosine distance.

    With d = 1 - sim, each negative pair costs max(0, margin - d). ``reduction="mean"`` averages
    over all negative pairs; ``"max"`` takes each row's hardest negative and averages over the
    rows that have at least one negative.
    """
    if reduction not in MARGIN_REDUCTIONS:
        raise ValueError(f"reduction must be one of {MARGIN_REDUCTIONS}, got {reduction!r}")
    sim = _as_f32(sim)
    hinge = jnp.maximum(0.0, margin - (1.0 - sim))
    if reduction == "mean":
        return _masked_mean(hinge, negative_mask)
    hardest = jnp.max(jnp.where(negative_mask, hinge, 0.0), axis=1)
    return _masked_mean(hardest, jnp.any(negative_mask, axis=1))


def triplet_loss(
    pos_sim: Array, neg_sim: Array, margin: float = DEFAULT_MARGIN, valid: Array | None = None
) -> Array:
    """Mean of max(0, margin - pos_sim + neg_sim) (= margin + d_pos - d_neg) over valid triplets."""
    pos_sim, neg_sim = _as_f32(pos_sim), _as_f32(neg_sim)
    hinge = jnp.maximum(0.0, margin - pos_sim + neg_sim)
    if valid is None:
        return jnp.mean(hinge)
    return _masked_mean(hinge, valid)


def rank_loss(sim: Array, positive_mask: Array, margin: float = DEFAULT_MARGIN) -> Array:
    """Bidirectional pairwise ranking loss (Kiros et al. 2014, VSE) on a square matrix.

    For each anchor i, sum max(0, margin - s_ii + s_ik) over the negatives k of row i (captions
    ranking images) and max(0, margin - s_ii + s_ki) over the negatives of column i (images
    ranking captions). Kiros et al. sum over the batch; this averages over the B anchors so the
    scale does not grow with the batch size (it still grows with the negatives per anchor).
    """
    sim = _as_f32(sim)
    positive_mask = jnp.asarray(positive_mask, jnp.bool_)
    real = jnp.diagonal(positive_mask)  # rows whose diagonal pair is a positive
    negative = ~positive_mask & ~jnp.eye(sim.shape[0], dtype=jnp.bool_)
    pos = jnp.diagonal(sim)
    row_hinge = jnp.where(
        negative & real[:, None], jnp.maximum(0.0, margin - pos[:, None] + sim), 0.0
    )
    col_hinge = jnp.where(
        negative & real[None, :], jnp.maximum(0.0, margin - pos[None, :] + sim), 0.0
    )
    return (jnp.sum(row_hinge) + jnp.sum(col_hinge)) / sim.shape[0]


def _infonce_rows(logits: Array, positive_mask: Array) -> Array:
    log_prob = jax.nn.log_softmax(logits, axis=1)
    positive = positive_mask.astype(jnp.float32)
    count = jnp.sum(positive, axis=1)
    row_loss = -jnp.sum(log_prob * positive, axis=1) / jnp.maximum(count, 1.0)
    return _masked_mean(row_loss, count > 0)


def infonce_loss(
    sim: Array,
    positive_mask: Array,
    temperature: float = DEFAULT_TEMPERATURE,
    hard: tuple[Array, Array] | None = None,
) -> Array:
    """Multi-positive InfoNCE (SupCon style), averaged over both directions.

    Row i costs -mean over its positives p of log softmax(sim[i] / T)[p]; rows without positives
    are left out. The same is done on columns, and the two directions are averaged.
    ``hard`` = (similarity [B], valid [B]) adds to row i's softmax a negative of its own
    (I2CE's word-swapped anchor), where valid.
    """
    logits = _as_f32(sim) / temperature
    row_logits, row_positive = logits, positive_mask
    if hard is not None:
        hard_sim, valid = hard
        extra = jnp.where(valid, _as_f32(hard_sim) / temperature, NO_LOGIT)
        row_logits = jnp.concatenate([logits, extra[:, None]], axis=1)
        row_positive = jnp.concatenate([positive_mask, jnp.zeros_like(valid)[:, None]], axis=1)
    return 0.5 * (
        _infonce_rows(row_logits, row_positive) + _infonce_rows(logits.T, positive_mask.T)
    )


def pair_vectors(sim: Array, positive: Array, perm: Array) -> tuple[Array, Array]:
    """VTFN's shuffled pairs: the B matching pairs plus one permuted pair per row.

    Returns x = [diag(sim), sim[i, perm[i]]] and labels y = [+1 * B, +1 if the permuted pair
    shows the same image else -1], both float32 of shape [2B].
    """
    sim = _as_f32(sim)
    rows = jnp.arange(sim.shape[0])
    x = jnp.concatenate([jnp.diagonal(sim), sim[rows, perm]])
    y = jnp.concatenate(
        [jnp.ones(sim.shape[0], jnp.float32), jnp.where(positive[rows, perm], 1.0, -1.0)]
    )
    return x, y


def _pearson_entry(sim: Array, positive: Array, perm: Array) -> Array:
    return pearson_loss(*pair_vectors(sim, positive, perm))


def _covariance_entry(sim: Array, positive: Array, perm: Array) -> Array:
    return covariance_loss(*pair_vectors(sim, positive, perm))


def _kendall_entry(
    sim: Array, positive: Array, perm: Array, alpha: float = DEFAULT_KENDALL_ALPHA
) -> Array:
    return kendall_loss(*pair_vectors(sim, positive, perm), alpha=alpha)


def _rank_entry(sim: Array, positive: Array, perm: Array, margin: float = DEFAULT_MARGIN) -> Array:
    del perm  # every in-batch negative is used
    return rank_loss(sim, positive, margin)


def _margin_entry(
    sim: Array,
    positive: Array,
    perm: Array,
    margin: float = DEFAULT_MARGIN,
    reduction: str = "mean",
) -> Array:
    del perm  # every in-batch negative is used
    off_diagonal = ~jnp.eye(sim.shape[0], dtype=jnp.bool_)
    return margin_loss(sim, ~jnp.asarray(positive, jnp.bool_) & off_diagonal, margin, reduction)


def _triplet_entry(
    sim: Array, positive: Array, perm: Array, margin: float = DEFAULT_MARGIN
) -> Array:
    rows = jnp.arange(sim.shape[0])
    positive = jnp.asarray(positive, jnp.bool_)
    valid = jnp.diagonal(positive) & ~positive[rows, perm]
    return triplet_loss(jnp.diagonal(sim), sim[rows, perm], margin, valid=valid)


def _infonce_entry(
    sim: Array, positive: Array, perm: Array, temperature: float = DEFAULT_TEMPERATURE
) -> Array:
    del perm  # every in-batch negative is used
    return infonce_loss(sim, positive, temperature)


LOSSES: dict[str, LossFn] = {
    "pearson": _pearson_entry,
    "covariance": _covariance_entry,
    "kendall": _kendall_entry,
    "rank": _rank_entry,
    "margin": _margin_entry,
    "triplet": _triplet_entry,
    "infonce": _infonce_entry,
}


def get_loss(name: str) -> LossFn:
    """The registry entry ``fn(sim, positive, perm, **hparams) -> scalar`` called ``name``."""
    try:
        return LOSSES[name]
    except KeyError:
        raise KeyError(f"unknown loss {name!r}; valid names: {sorted(LOSSES)}") from None


def loss_hparam_names(name: str) -> tuple[str, ...]:
    """The keyword hyperparameters the loss ``name`` accepts (e.g. ``("margin", "reduction")``).

    Lets a trainer pass only the config keys a loss understands; any other keyword is a TypeError.
    """
    params = list(inspect.signature(get_loss(name)).parameters)
    return tuple(params[3:])
