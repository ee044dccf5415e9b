"""bench/accelerator_check.py's training rows: device peaks, MFU and the run's scale.

A case is one model at one batch size (bench/cases/catalogue.py's ``CASES``: I2CE at
paper scale, VTFN-GRU, VTFN-BOW); ``time_training`` times the library's step on it.
The batch sweep runs ``SWEPT`` at every ``Scale.batches`` in both dtypes, and
``dtype_ratios`` sums it up as bfloat16 / float32 examples/s per batch.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence

import jax

from bench.cases import catalogue, flops
from bench.cases.catalogue import CaseSizes, TrainingCase
from bench.cases.placed import PlacedSteps

DTYPES = ("float32", "bfloat16")
MIN_TIMED_STEPS = 3  # a row short of time times no fewer steps than this
TERA = 1e12


@dataclasses.dataclass(frozen=True)
class Peak:
    """Dense matmul peak of one device in TFLOP/s, per compute dtype.

    ``float32`` is for float32 matmuls at JAX's default precision, which runs
    them as TF32 on A100/H100/H200 and as one bfloat16 pass on TPU.
    """

    name: str
    bfloat16: float
    float32: float


# Substrings of jax's device_kind (lower case) -> peak; the first match wins.
KNOWN_PEAKS: tuple[tuple[tuple[str, ...], Peak], ...] = (
    (("h100 pcie",), Peak("H100 PCIe", 756.0, 378.0)),
    (("h100", "h200", "gh200"), Peak("H100/H200 SXM", 989.0, 494.0)),
    (("a100",), Peak("A100", 312.0, 156.0)),
    # V100 has no bfloat16 tensor cores: 125 is its float16 peak, float32 runs without TF32.
    (("v100",), Peak("V100", 125.0, 15.7)),
    (("v6 lite", "v6e"), Peak("TPU v6e", 918.0, 918.0)),
    (("v5 lite", "v5e"), Peak("TPU v5e", 197.0, 197.0)),
    (("v5p", "tpu v5"), Peak("TPU v5p", 459.0, 459.0)),
    (("tpu v4",), Peak("TPU v4", 275.0, 275.0)),
)


@dataclasses.dataclass(frozen=True)
class Scale:
    """One run of the check: the cases' sizes (bench/cases/catalogue.py), the paper's
    (``FULL``) or tiny ones for tests (``TOY``), and how long each row runs.

    ``batches``: the batch sweep's sizes; ``twin_batches``: those of the rows against
    the PyTorch twins, each ``twin_rounds`` alternating rounds of ``twin_steps`` steps a
    side.
    """

    sizes: CaseSizes
    batches: tuple[int, ...]
    twin_batches: tuple[int, ...]
    twin_rounds: int
    twin_steps: int
    demos: tuple[tuple[str, str], ...]
    demo_steps: int
    scoring_pairs: int | None  # None: every pair
    steps: int
    warmup: int


FULL = Scale(
    sizes=catalogue.PAPER,
    batches=(128, 1024, 4096),
    twin_batches=(128, 1024),
    twin_rounds=5,
    twin_steps=10,
    demos=(),  # the check's own (bench/accelerator_check.py)
    demo_steps=5,
    scoring_pairs=None,
    steps=20,
    warmup=2,
)
TOY = Scale(
    sizes=catalogue.TOY,
    batches=(8, 16),
    twin_batches=(8,),
    twin_rounds=3,
    twin_steps=2,
    demos=(),
    demo_steps=2,
    scoring_pairs=100,
    steps=3,
    warmup=1,
)


# --------------------------------------------------------------------------- peaks
def known_peak(device_kind: str) -> Peak | None:
    kind = device_kind.lower()
    return next((peak for names, peak in KNOWN_PEAKS if any(n in kind for n in names)), None)


def device_peaks(device_kind: str) -> dict[str, dict]:
    """Per compute dtype: the peak of all devices together (TFLOP/s) and where it comes from."""
    count = jax.device_count()
    peak = known_peak(device_kind)
    if peak is None:
        rate = flops.measured_matmul_peak(repeats=3) / TERA
        source = f"measured: {flops.PEAK_MATMUL_SIZE}³ float32 matmul on {device_kind}"
        return {d: {"tflops": rate * count, "source": source} for d in DTYPES}
    return {
        d: {"tflops": getattr(peak, d) * count, "source": f"table: {peak.name} {d}"} for d in DTYPES
    }


def xla_flops(compiled: jax.stages.Compiled) -> float | None:
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["flops"]) if cost and "flops" in cost else None


def time_training(
    case: TrainingCase,
    steps: int,
    warmup: int,
    peak_tflops: float,
    seconds_left: Callable[[], float] | None = None,
) -> dict:
    """Times ``steps`` train steps after ``warmup``; examples/s, TFLOP/s and MFU.

    With ``seconds_left``, fewer steps (MIN_TIMED_STEPS at least) when the warm-up
    steps' pace says that ``steps`` would not end in the time left.
    """
    placed = PlacedSteps.prepare(case)
    began = time.perf_counter()
    placed.run(warmup)
    pace = (time.perf_counter() - began) / max(warmup, 1)
    planned = steps
    if seconds_left is not None and pace > 0:
        steps = max(MIN_TIMED_STEPS, min(steps, int(0.8 * seconds_left() / pace)))
    began = time.perf_counter()
    metrics = placed.run(steps)
    seconds = (time.perf_counter() - began) / steps
    loss = float(metrics["loss"])
    if not math.isfinite(loss):
        raise FloatingPointError(f"training loss is {loss} after {warmup + steps} steps")
    achieved = case.step_flops.training / seconds / TERA
    shortened = (
        f"; {steps} of {planned} steps timed, for the time budget" if steps < planned else ""
    )
    return {
        "throughput": case.config.batch_size / seconds,
        "unit": "examples/s",
        "step_ms": seconds * 1e3,
        "steps": steps,
        "loss": loss,
        "flops_per_step": case.step_flops.training,
        "flops_by_part": case.step_flops.training_parts(),
        "tflops": achieved,
        "peak_tflops": peak_tflops,
        "mfu": achieved / peak_tflops,
        "xla_flops": xla_flops(placed.compiled),
        "hand_flops_as_xla_counts": case.step_flops.as_xla_counts,
        "note": case.sizes + shortened,
    }


def dtype_ratios(rows: Sequence[Mapping], check: str) -> dict[str, float]:
    """bfloat16 / float32 examples/s of ``check``'s sweep rows, by batch (both rows ok)."""
    speed = {
        (row["dtype"], row["batch"]): row["throughput"]
        for row in rows
        if row["check"] == check and row["status"] == "ok" and row.get("batch")
    }
    return {
        str(batch): speed["bfloat16", batch] / speed["float32", batch]
        for dtype, batch in speed
        if dtype == "float32" and ("bfloat16", batch) in speed
    }
