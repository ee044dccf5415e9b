"""The optimizer every run trains with, the parameters it updates, and the step count."""

from __future__ import annotations

import math

import jax
import ml_collections
import optax
from flax import nnx

# The optimizer's numbers that may differ between the members of one pack (declared
# without JAX, where launch.grid reads them too).
from capsim.config_lib import HYPERPARAMETERS


def steps_for_epochs(config: ml_collections.ConfigDict, num_examples: int) -> int:
    """``config.num_steps``, derived from ``num_epochs`` over ``num_examples`` when it is -1."""
    if config.num_steps < 0:
        config.num_steps = math.ceil(config.num_epochs * num_examples / config.batch_size)
    return config.num_steps


def make_optimizer(config: ml_collections.ConfigDict) -> optax.GradientTransformation:
    """Adam with exponential learning-rate decay, optional L2 and gradient clipping.

    Config keys (``config.optimizer``): learning_rate, decay_rate, decay_steps,
    l2 (coupled L2 penalty, added to the gradient as in the VTFN paper), clip_norm.
    The numbers a grid varies (``HYPERPARAMETERS``) live in the optimizer's state
    (optax.inject_hyperparams), not in the compiled step: members of a pack with other
    learning rates share one program, in turn or vmapped (capsim.train.members).
    """
    opt = config.optimizer
    numbers = {name: float(opt[name]) for name in HYPERPARAMETERS}
    numbers["decay_steps"] = float(max(opt.decay_steps, 1))
    return optax.inject_hyperparams(_adam, static_args=("clip_norm",))(
        clip_norm=float(opt.clip_norm or 0.0), **numbers
    )


def _adam(
    learning_rate: jax.Array,
    decay_rate: jax.Array,
    decay_steps: jax.Array,
    l2: jax.Array,
    clip_norm: float,
) -> optax.GradientTransformation:
    """The chain ``make_optimizer`` injects its numbers into; the schedule is optax's
    ``exponential_decay`` (not staircase) written over arrays."""

    def schedule(count: jax.Array) -> jax.Array:
        return learning_rate * decay_rate ** (count / decay_steps)

    parts = [optax.clip_by_global_norm(clip_norm)] if clip_norm else []
    parts += [optax.add_decayed_weights(l2), optax.adam(schedule)]
    return optax.chain(*parts)


def trainable(config: ml_collections.ConfigDict) -> nnx.filterlib.Filter:
    """The parameters training updates: all but those whose path names one of
    ``optimizer.frozen`` (e.g. ``("embed",)`` keeps pretrained word vectors as they are)."""
    frozen = tuple(config.optimizer.get("frozen", ()))
    if not frozen:
        return nnx.Param
    return nnx.All(nnx.Param, nnx.Not(nnx.Any(*(nnx.PathContains(name) for name in frozen))))
