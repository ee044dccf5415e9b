"""bench/accelerator_check.py's lever rows: bench/speed/step_levers.py's (issue 48 §2) in a short
lease, from the same parts (bench/cases/i2ce_levers.py, bench/cases/step_host.py).

One row per measurement, each checked against the budget on its own: the paper-scale
I2CE step's parts in bfloat16 and float32, then each model lever alone against the
shipped step (bfloat16 first: the logits, the decoder unrolled), then what making the
key in the step gained per model, and a batch placed in one call
against one per array. A lever row recompiles the shipped step beside its own, which
the persistent compilation cache turns into a load after the batch sweep.
"""

from __future__ import annotations

import dataclasses

from bench.accelerator.rows import Recorder
from bench.cases import i2ce_levers, step_host
from bench.cases.catalogue import CASES, CaseSizes


@dataclasses.dataclass(frozen=True)
class LeverSizes:
    batch: int  # the I2CE step's, for the parts and the levers
    key_batch: int  # the host-key rows' (small: a short step shows the host's cost)
    input_batch: int  # the placement row's
    steps: int
    key_steps: int
    rounds: int


FULL_LEVERS = LeverSizes(
    batch=1024, key_batch=128, input_batch=1024, steps=10, key_steps=50, rounds=3
)
TOY_LEVERS = LeverSizes(batch=8, key_batch=8, input_batch=8, steps=2, key_steps=5, rounds=2)
# (dtype, lever) in priority order; the unrolled decoder fully is scale.tokens steps.
LEVER_ROWS = (
    ("bfloat16", "logits in bfloat16"),
    ("bfloat16", "decoder unrolled fully"),
    ("bfloat16", "decoder unrolled x4"),
    ("float32", "decoder unrolled fully"),
    ("bfloat16", "decoder unrolled x2"),
    ("float32", "decoder unrolled x4"),
)


def _parts_row(scale: CaseSizes, sizes: LeverSizes, dtype: str) -> dict:
    parts = i2ce_levers.measure_parts(scale, dtype, sizes.batch, sizes.steps, sizes.rounds)
    whole = next(p for p in parts if p["part"] == "whole step")
    return {
        "parts": parts,
        "throughput": sizes.batch / (whole["ms"] / 1e3),
        "unit": "examples/s",
        "note": ", ".join(
            f"{p['part']} {p['ms']:.2f} ms ({p['share_of_step']:.0%})" for p in parts
        ),
    }


def _lever_row(scale: CaseSizes, sizes: LeverSizes, dtype: str, lever: str) -> dict:
    (row,) = i2ce_levers.measure_levers(
        scale, dtype, sizes.batch, sizes.steps, sizes.rounds, only=(lever,)
    )
    return {
        **row,
        "throughput": row["examples_per_second"],
        "unit": "examples/s",
        "ratio_of": "lever/shipped",
        "note": f"first loss {row['first_loss']:.5f}, shipped {row['first_loss_shipped']:.5f}",
    }


def _host_key_row(scale: CaseSizes, sizes: LeverSizes, model: str) -> dict:
    row = step_host.measure_host_key(scale, model, sizes.key_batch, sizes.key_steps, sizes.rounds)
    return {
        **row,
        "ratio_of": "key in step/on host",
        "note": f"{row['step_us_key_in_step']:,.0f} µs a step with the key made in it, "
        f"{row['step_us_key_on_host']:,.0f} µs with it made on the host",
    }


def _placement_row(scale: CaseSizes, sizes: LeverSizes) -> dict:
    rows = step_host.measure_placement(scale, sizes.input_batch, sizes.key_steps, sizes.rounds)
    return {
        "placement": rows,
        "note": ", ".join(
            f"{r['batch_of']}: {r['us_one_call']:,.0f} µs in one call, "
            f"{r['us_per_array']:,.0f} µs a call per array"
            for r in rows
        ),
    }


def levers(rec: Recorder, scale: CaseSizes, toy: bool, share: float) -> None:
    """The parts, the model levers, the host-key and placement rows, each ending by ``share``."""
    sizes = TOY_LEVERS if toy else FULL_LEVERS
    for dtype in ("bfloat16", "float32"):
        rec.row(
            "I2CE-paper-scale parts",
            dtype,
            lambda d=dtype: _parts_row(scale, sizes, d),
            kind="parts",
            share=share,
            batch=sizes.batch,
        )
    for dtype, lever in LEVER_ROWS:
        rec.row(
            f"I2CE lever: {lever}",
            dtype,
            lambda d=dtype, name=lever: _lever_row(scale, sizes, d, name),
            kind="lever",
            share=share,
            batch=sizes.batch,
        )
    for model in CASES:
        rec.row(
            f"{model} host key",
            "float32",
            lambda m=model: _host_key_row(scale, sizes, m),
            kind="host key",
            share=share,
            batch=sizes.key_batch,
        )
    rec.row(
        "batch placement",
        "float32",
        lambda: _placement_row(scale, sizes),
        kind="placement",
        share=share,
        batch=sizes.input_batch,
    )
