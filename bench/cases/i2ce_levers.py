"""The paper-scale I2CE step cut into its parts, and its model levers alone (issue 48 §2),
on whatever ``jax.devices()`` gives: bench/speed/step_levers.py's rows, the accelerator
check's lever rows, and throughput.py's parts table (the JAX side) share them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from bench.cases.catalogue import CaseSizes, TrainingCase, i2ce_case
from bench.cases.placed import PlacedSteps
from bench.harness import load_average, ratio_summary, time_rounds
from capsim.recurrence import scan_rnn
from i2ce_jax import model as i2ce_model


# --------------------------------------------------------------------------- parts
def part_inputs(batch: int, length: int, embed: int, hidden: int) -> dict[str, np.ndarray]:
    """Random activations shaped like the step's: decoder outputs and the cotangent of
    them, decoder inputs and the initial state (scaled by 0.1, as trained ones are small)."""
    rng = np.random.default_rng(0)

    def small_normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, np.float32) * 0.1

    return {
        "outputs": small_normal(batch, length, hidden),
        "cotangent": small_normal(batch, length, hidden),
        "inputs": small_normal(batch, length, embed),
        "start": small_normal(batch, hidden),
    }


def i2ce_part_steps(
    model: i2ce_model.I2CEAutoencoder, batch: Mapping[str, np.ndarray], inputs: Mapping
) -> dict[str, Callable[[], object]]:
    """Per part, a call that dispatches one forward and backward pass of it (not waited for).

    "readout": the vocabulary product and the NLL (i2ce_model.sequence_nll), gradients
    for the weights and the decoder outputs. "decoder GRU": the decoder's masked scan
    (capsim.recurrence.scan_rnn, the model's ``decoder_unroll``), gradients for its
    weights, inputs and initial state. Activations are in the model's compute dtype.
    Both run every padded step, as the whole step does.
    """
    ids, mask = batch["anchor_ids"], batch["anchor_mask"]
    targets, target_mask, step_mask = ids[:, 1:], mask[:, 1:], mask[:, :-1]
    dtype = model.decoder_cell.dtype or jnp.float32
    readout_def, readout_params = nnx.split(model.readout)
    cell_def, cell_params = nnx.split(model.decoder_cell)
    cotangent = jnp.asarray(inputs["cotangent"], dtype)

    @jax.jit
    def readout(params, outputs):
        def nll(params, outputs):
            logits = nnx.merge(readout_def, params)(outputs)
            return i2ce_model.sequence_nll(logits, targets, target_mask)

        return jax.grad(nll, argnums=(0, 1))(params, outputs)

    @jax.jit
    def decoder(params, step_inputs, start):
        def total(params, step_inputs, start):
            cell = nnx.merge(cell_def, params)
            _, out = scan_rnn(cell, step_inputs, step_mask, start, unroll=model.decoder_unroll)
            return jnp.sum((out * cotangent).astype(jnp.float32))

        return jax.grad(total, argnums=(0, 1, 2))(params, step_inputs, start)

    outputs, step_inputs, start = (
        jnp.asarray(inputs[k], dtype) for k in ("outputs", "inputs", "start")
    )
    return {
        "readout": lambda: readout(readout_params, outputs),
        "decoder GRU": lambda: decoder(cell_params, step_inputs, start),
    }


def measure_parts(scale: CaseSizes, dtype: str, batch: int, steps: int, rounds: int) -> list[dict]:
    """ms per step of each part and of the whole step, alternating; each part's share."""
    case = i2ce_case(scale, dtype, batch)
    host = case.batches[0]
    inputs = part_inputs(batch, scale.tokens - 1, scale.embed, scale.hidden)
    calls = i2ce_part_steps(case.model, host, inputs)
    placed = PlacedSteps.prepare(case)

    def repeat(call: Callable[[], object]) -> Callable[[int], None]:
        return lambda _: jax.block_until_ready([call() for _ in range(steps)])

    runners = {name: repeat(call) for name, call in calls.items()}
    runners["whole step"] = lambda _: placed.run(steps)
    for run in runners.values():
        run(0)  # compile and warm up
    load = load_average()
    seconds = time_rounds(runners, rounds)
    whole = float(np.median(seconds["whole step"])) / steps
    return [
        {
            "part": name,
            "dtype": dtype,
            "batch": batch,
            "ms": float(np.median(times)) / steps * 1e3,
            "share_of_step": float(np.median(times)) / steps / whole,
            "load_average": [load, load_average()],
        }
        for name, times in seconds.items()
    ]


# --------------------------------------------------------------------------- model levers
def model_levers(dtype: str, tokens: int) -> dict[str, dict]:
    """Lever name -> its ``config.model`` changes; "shipped" is the config as it ships."""
    levers = {
        "shipped": {},
        "decoder unrolled x2": {"decoder_unroll": 2},
        "decoder unrolled x4": {"decoder_unroll": 4},
        "decoder unrolled fully": {"decoder_unroll": tokens},
    }
    if dtype != "float32":
        levers[f"logits in {dtype}"] = {"logits_dtype": dtype}
    return levers


def lever_case(scale: CaseSizes, dtype: str, batch: int, changes: Mapping) -> TrainingCase:
    """The paper-scale I2CE case with ``changes`` to its model config, built from the same seed."""
    case = i2ce_case(scale, dtype, batch)
    if not changes:
        return case
    config = case.config.copy_and_resolve_references()
    config.model.update(dict(changes))
    return dataclasses.replace(
        case, config=config, model=i2ce_model.build_model(config, case.vocab_size)
    )


def measure_levers(
    scale: CaseSizes,
    dtype: str,
    batch: int,
    steps: int,
    rounds: int,
    only: tuple[str, ...] | None = None,
) -> list[dict]:
    """Each lever against the shipped step, alternating rounds (``only``: those levers)."""
    levers = model_levers(dtype, scale.tokens)
    names = ["shipped", *(n for n in levers if n != "shipped" and (only is None or n in only))]
    placed = {n: PlacedSteps.prepare(lever_case(scale, dtype, batch, levers[n])) for n in names}
    first_loss = {n: float(p.run(1)["loss"]) for n, p in placed.items()}  # compiles, warms up
    load = load_average()
    seconds = time_rounds({n: lambda _, p=p: p.run(steps) for n, p in placed.items()}, rounds)
    return [
        {
            "lever": name,
            "dtype": dtype,
            "batch": batch,
            "changes": levers[name],
            "examples_per_second": batch * steps / float(np.median(seconds[name])),
            **ratio_summary(seconds[name], seconds["shipped"]),
            "first_loss": first_loss[name],
            "first_loss_shipped": first_loss["shipped"],
            "load_average": [load, load_average()],
        }
        for name in names[1:]
    ]
