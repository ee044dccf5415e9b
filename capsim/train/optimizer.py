"""The optimizer every run trains with, the parameters it updates, and the step count."""

from __future__ import annotations

import math

import ml_collections
import optax
from flax import nnx


def steps_for_epochs(config: ml_collections.ConfigDict, num_examples: int) -> int:
    """``config.num_steps``, derived from ``num_epochs`` over ``num_examples`` when it is -1."""
    if config.num_steps < 0:
        config.num_steps = math.ceil(config.num_epochs * num_examples / config.batch_size)
    return config.num_steps


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
    """Adam with exponential learning-rate decay, optional L2 and gradient clipping.

    Config keys (``config.optimizer``): learning_rate, decay_rate, decay_steps,
    l2 (coupled L2 penalty, added to the gradient as in the VTFN paper), clip_norm.
    """
    opt = config.optimizer
    schedule = optax.exponential_decay(
        opt.learning_rate, transition_steps=max(opt.decay_steps, 1), decay_rate=opt.decay_rate
    )
    parts = []
    if opt.clip_norm:
        parts.append(optax.clip_by_global_norm(opt.clip_norm))
    if opt.l2:
        parts.append(optax.add_decayed_weights(opt.l2))
    parts.append(optax.adam(schedule))
    return optax.chain(*parts)


def trainable(config: ml_collections.ConfigDict) -> nnx.filterlib.Filter:
    """The parameters training updates: all but those whose path names one of
    ``optimizer.frozen`` (e.g. ``("embed",)`` keeps pretrained word vectors as they are)."""
    frozen = tuple(config.optimizer.get("frozen", ()))
    if not frozen:
        return nnx.Param
    return nnx.All(nnx.Param, nnx.Not(nnx.Any(*(nnx.PathContains(name) for name in frozen))))
