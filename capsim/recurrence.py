"""Running a recurrent cell over padded batches: the masked time loop every RNN here uses.

The encoders' GRU/LSTM towers (capsim.encoders), the I2CE decoder and the caption
language models all step through ``scan_rnn``: a ``lax.scan`` that leaves each
sequence's carry unchanged on padding, with the GRU's input projection hoisted out
of the loop and, for inference, its loop unrolled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

Array = jax.Array
Carry = Any
LSTM_CELL_TYPES = (nnx.LSTMCell, nnx.OptimizedLSTMCell)

# Longer sentences keep the rolled loop: an unrolled one compiles in time linear in its steps.
MAX_UNROLLED_STEPS = 64


def zero_carry(cell: nnx.Module, batch_size: int) -> Carry:
    """All-zero initial carry for an NNX GRU cell ([B, H]) or LSTM cell ((c, h), each [B, H])."""
    hidden = jnp.zeros((batch_size, cell.hidden_features), jnp.float32)
    if isinstance(cell, LSTM_CELL_TYPES):
        return (hidden, hidden)
    return hidden


def scan_rnn(
    cell: Callable[[Carry, Array], tuple[Carry, Array]],
    inputs: Array,
    mask: Array,
    carry: Carry,
    *,
    unroll: bool | int = False,
    projected: bool = False,
) -> tuple[Carry, Array]:
    """Run an RNN cell over time, updating each sequence's carry only on its real tokens.

    Args:
      cell: any ``cell(carry, x_t) -> (new_carry, y_t)`` with x_t [B, E], e.g. ``nnx.GRUCell``
        or ``nnx.OptimizedLSTMCell``; its parameters are only read, never written.
      inputs: [B, L, E] batch-major inputs.
      mask: bool [B, L], True on real steps. Where it is False the carry passes through
        unchanged and the output is zero, so padding (anywhere, any amount) has no effect.
      carry: the initial carry, a pytree of [B, ...] arrays (``zero_carry`` or, for a decoder,
        the encoder's final state).
      unroll: for an ``nnx.GRUCell`` (other cells ignore it), True unrolls the whole time
        loop when it has at most MAX_UNROLLED_STEPS steps, and an int k runs k steps per
        loop iteration (1 and False: the rolled loop). On CPU the packaged I2CE encoders run
        1.5-1.7x as fast unrolled (bench/RESULTS.md, "Scoring throughput"), so inference
        asks for True; a CPU training step does not gain (bench/speed/step_levers.py) and an
        unrolled LSTM is slower (docs/DEVELOPMENT_NOTES.md).
      projected: for an ``nnx.GRUCell`` only: ``inputs`` are already its input projections
        ``cell.dense_i(x)`` [B, L, 3H] (capsim.encoders.RNNEncoder's inference tables).

    Returns:
      ``(final_carry, outputs)``: the carry after each sequence's last real step, and the
      per-step outputs [B, L, H] (zero at masked steps).
    """

    if isinstance(cell, nnx.GRUCell):
        steps = _steps_per_iteration(unroll, inputs.shape[1])
        return _scan_gru(cell, inputs if projected else cell.dense_i(inputs), mask, carry, steps)
    if projected:
        raise ValueError(f"projected inputs are for a GRU cell, got {type(cell).__name__}")

    def step(carry: Carry, step_in: tuple[Array, Array]) -> tuple[Carry, Array]:
        x_t, m_t = step_in
        new_carry, y_t = cell(carry, x_t)
        keep = m_t[:, None]
        carry = jax.tree.map(lambda new, old: jnp.where(keep, new, old), new_carry, carry)
        return carry, jnp.where(keep, y_t, 0.0)

    time_major = (jnp.swapaxes(inputs, 0, 1), jnp.swapaxes(mask, 0, 1))
    final_carry, outputs = jax.lax.scan(step, carry, time_major)
    return final_carry, jnp.swapaxes(outputs, 0, 1)


def _steps_per_iteration(unroll: bool | int, steps: int) -> int:
    """lax.scan's ``unroll`` for scan_rnn's: True is every step (up to MAX_UNROLLED_STEPS)."""
    if unroll is True:
        return steps if steps <= MAX_UNROLLED_STEPS else 1
    if unroll < 0:
        raise ValueError(f"unroll must be True, False or a count of steps >= 1, got {unroll}")
    return max(1, min(int(unroll), steps))


def _scan_gru(
    cell: nnx.GRUCell, projected: Array, mask: Array, hidden: Array, unroll: int
) -> tuple[Array, Array]:
    """``scan_rnn`` for nnx.GRUCell given every step's input projection [B, L, 3H].

    The projection is hoisted out of the loop (one [B·L, E] x [E, 3H] matrix product, or a
    gather from a vocabulary table), so the sequential part only multiplies the hidden
    state. The gate equations are nnx.GRUCell's own.
    """
    projected = jnp.swapaxes(projected, 0, 1)  # [L, B, 3H]

    def step(h: Array, step_in: tuple[Array, Array]) -> tuple[Array, Array]:
        x_t, m_t = step_in
        x_r, x_z, x_n = jnp.split(x_t, 3, axis=-1)
        h_r, h_z, h_n = jnp.split(cell.dense_h(h), 3, axis=-1)
        r = cell.gate_fn(x_r + h_r)
        z = cell.gate_fn(x_z + h_z)
        n = cell.activation_fn(x_n + r * h_n)
        new_h = (1.0 - z) * n + z * h
        keep = m_t[:, None]
        return jnp.where(keep, new_h, h), jnp.where(keep, new_h, 0.0)

    time_major = (projected, jnp.swapaxes(mask, 0, 1))
    final, outputs = jax.lax.scan(step, hidden, time_major, unroll=unroll)
    return final, jnp.swapaxes(outputs, 0, 1)
