"""Model FLOPs per training step, counted by hand from the shapes, for MFU.

Only matrix products and convolutions count (the MFU convention): gate
nonlinearities, softmax, norms and embedding gathers are left out. A GRU step
multiplies its input [B, E] by [E, 3H] (hoisted out of the scan in
capsim.recurrence._scan_gru) and its state [B, H] by [H, 3H]; an LSTM has 4 gates,
both products inside the scan. The masked scan runs every padded step, so the count
depends on the padded length, not on the caption lengths. Training costs
``TRAINING_FACTOR`` forward passes: the backward pass of a product computes the
gradients of both operands, two products of the same size; a product whose
input is data (VTFN's image features) needs only the weights' gradient.

Paper-scale I2CE (batch 128, 20 tokens, embed 300, hidden 512, vocabulary
10,000, margin branch): 112 GFLOP per step, of which the GRUs 37 and the
vocabulary readout 75. The decoder reads ``<S> w1 .. wn`` and so runs 19 steps
at 20 tokens; counting 20 decoder steps gives the rounder 117 (38 + 79).

``jax.jit(f).lower(...).compile().cost_analysis()["flops"]`` counts the body of
a ``lax.scan`` once, not once per step (checked in
tests/test_accelerator_check.py), so it matches ``StepFlops.as_xla_counts``,
not ``StepFlops.training``: only the parts outside a scan (input projections,
readout, similarities) are comparable with XLA's count.
"""

from __future__ import annotations

import dataclasses
import math
import time

import jax
import jax.numpy as jnp
import ml_collections

TRAINING_FACTOR = 3


def matmul_flops(rows: int, inner: int, cols: int) -> int:
    """A [rows, inner] x [inner, cols] product: one multiply and one add per term."""
    return 2 * rows * inner * cols


@dataclasses.dataclass(frozen=True)
class StepFlops:
    """Forward matmul FLOPs of one step by part; ``loop_steps[part]`` is the scan length of a
    part computed inside a ``lax.scan`` (absent: outside any loop); ``data_input`` names the
    parts whose input needs no gradient."""

    parts: dict[str, int]
    loop_steps: dict[str, int] = dataclasses.field(default_factory=dict)
    data_input: frozenset[str] = frozenset()

    @property
    def forward(self) -> int:
        return sum(self.parts.values())

    def training_parts(self, loop_bodies_once: bool = False) -> dict[str, int]:
        """Forward and backward FLOPs by part; ``loop_bodies_once`` counts each scan body once."""
        return {
            part: (TRAINING_FACTOR - (part in self.data_input))
            * (flops // self.loop_steps.get(part, 1) if loop_bodies_once else flops)
            for part, flops in self.parts.items()
        }

    @property
    def training(self) -> int:
        """FLOPs of one training step (forward and backward)."""
        return sum(self.training_parts().values())

    @property
    def as_xla_counts(self) -> int:
        """The training FLOPs with each scan body counted once, as XLA's cost_analysis does."""
        return sum(self.training_parts(loop_bodies_once=True).values())


def rnn_flops(
    prefix: str, batch: int, steps: int, in_dim: int, hidden: int, cell: str = "gru"
) -> StepFlops:
    """A GRU (3 gates, input projection hoisted out of the scan) or an LSTM (4 gates, both
    projections inside capsim.recurrence.scan_rnn's loop)."""
    gates = {"gru": 3, "lstm": 4}[cell]
    return StepFlops(
        parts={
            f"{prefix}.input": matmul_flops(batch * steps, in_dim, gates * hidden),
            f"{prefix}.recurrent": matmul_flops(batch * steps, hidden, gates * hidden),
        },
        loop_steps={f"{prefix}.recurrent": steps}
        | ({f"{prefix}.input": steps} if cell == "lstm" else {}),
    )


def _text_tower(config: ml_collections.ConfigDict, batch: int, tokens: int) -> StepFlops:
    """capsim.encoders' tower that ``config.model.encoder`` names, with VTFN's sizes (N = dim)."""
    model, kind = config.model, config.model.encoder.kind
    if kind.startswith("bow"):  # a sum of word vectors: no product
        return StepFlops({})
    if kind in ("gru", "lstm"):
        return rnn_flops("text", batch, tokens, model.embed_dim, model.dim, kind)
    if kind == "cnn":
        widths, features = tuple(model.encoder.widths), model.encoder.features
        convs = sum(matmul_flops(batch * tokens, w * model.embed_dim, features) for w in widths)
        dense = matmul_flops(batch, features * len(widths), model.dim)
        return StepFlops({"text.convolutions": convs, "text.dense": dense})
    raise ValueError(f"no FLOP count for the {kind!r} text tower")


def _combine(
    *pieces: StepFlops, data_input: frozenset[str] = frozenset(), **parts: int
) -> StepFlops:
    merged = StepFlops(dict(parts), {}, data_input)
    for piece in pieces:
        merged.parts.update(piece.parts)
        merged.loop_steps.update(piece.loop_steps)
    return merged


def i2ce_step_flops(config: ml_collections.ConfigDict, vocab_size: int) -> StepFlops:
    """I2CEAutoencoder with its loss (i2ce_jax.model.make_loss_fn) on ``config``'s shapes.

    Reads batch_size, data.max_len, model.embed_dim, model.hidden_dim and the loss
    branch: the "similar" pairing encodes a second caption per anchor.
    """
    batch, tokens = config.batch_size, config.data.max_len
    embed, hidden = config.model.embed_dim, config.model.hidden_dim
    semantic = config.loss.name != "none"
    encoded = batch * (2 if semantic and config.loss.pairing == "similar" else 1)
    return _combine(
        rnn_flops("encoder", encoded, tokens, embed, hidden),
        rnn_flops("decoder", batch, tokens - 1, embed, hidden),
        readout=matmul_flops(batch * (tokens - 1), hidden, vocab_size),
        similarity=matmul_flops(batch, hidden, batch) if semantic else 0,
    )


def vtfn_step_flops(config: ml_collections.ConfigDict, image_dim: int) -> StepFlops:
    """VTFN (vtfn_jax.model) with any text tower on ``config``'s shapes.

    Reads batch_size, data.max_len, config.model (encoder, embed_dim, dim, the CNN's
    widths and features) and the loss weights (the image term maps the features by W;
    the pivot term encodes a second caption).
    """
    batch, tokens, dim = config.batch_size, config.data.max_len, config.model.dim
    image = config.loss.image_weight > 0
    pivot = config.loss.pivot_weight > 0
    return _combine(
        _text_tower(config, batch * (2 if pivot else 1), tokens),
        image_map=matmul_flops(batch, image_dim, dim) if image else 0,
        similarity=(image + pivot) * matmul_flops(batch, dim, batch),
        data_input=frozenset({"image_map"}),  # frozen image features
    )


# The product the peak is timed on: [2048, 2048] x [2048, 2048] in float32, large enough to
# fill the matmul units, short enough to time ten of in a second.
PEAK_MATMUL_SIZE = 2048


def measured_matmul_peak(size: int = PEAK_MATMUL_SIZE, repeats: int = 5) -> float:
    """FLOP/s of the fastest of ``repeats`` [size, size] float32 products on the default
    device: the peak to measure MFU against where no table gives one (CPUs)."""
    a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
    product = jax.jit(jnp.matmul)
    product(a, a).block_until_ready()
    best = math.inf
    for _ in range(repeats):
        began = time.perf_counter()
        product(a, a).block_until_ready()
        best = min(best, time.perf_counter() - began)
    return matmul_flops(size, size, size) / best
