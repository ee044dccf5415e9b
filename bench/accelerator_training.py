"""bench/accelerator_check.py's training rows: paper-scale cases, device peaks and MFU.

A case is one model at one batch size (``CASES``: I2CE at paper scale, VTFN-GRU,
VTFN-BOW); ``time_training`` times the library's step on it. The batch sweep runs
the first two at every ``Scale.batches`` in both dtypes, and ``dtype_ratios`` sums
it up as bfloat16 / float32 examples/s per batch.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence

import jax
import ml_collections
import numpy as np
from flax import nnx

from bench import flops
from capsim import text
from capsim.train import Trainer
from configs import coco_bow, coco_gru, i2ce_coco_margin
from i2ce_jax import model as i2ce_model
from vtfn_jax import model as vtfn_model

DTYPES = ("float32", "bfloat16")
DISTINCT_BATCHES = 4
MIN_TIMED_STEPS = 3  # a row short of time times no fewer steps than this
MEASURED_MATMUL = 2048
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
    """Sizes of one run: the paper's (``FULL``) or tiny ones for tests (``TOY``).

    ``batches``: the batch sweep's sizes; ``twin_batches``: those of the rows against
    the PyTorch twins, each ``twin_rounds`` alternating rounds of ``twin_steps`` steps a
    side.
    """

    batches: tuple[int, ...]
    twin_batches: tuple[int, ...]
    twin_rounds: int
    twin_steps: int
    tokens: int
    embed: int
    hidden: int
    vocab: int
    vtfn_dim: int
    vtfn_tokens: int
    image_dim: int
    demos: tuple[tuple[str, str], ...]
    demo_steps: int
    scoring_pairs: int | None  # None: every pair
    steps: int
    warmup: int


# The paper's sizes and tiny ones for the tests.
FULL = Scale(
    batches=(128, 1024, 4096),
    twin_batches=(128, 1024),
    twin_rounds=5,
    twin_steps=10,
    tokens=20,
    embed=300,
    hidden=512,
    vocab=10_000,
    vtfn_dim=128,
    vtfn_tokens=24,
    image_dim=2048,
    demos=(),  # the check's own (bench/accelerator_check.py)
    demo_steps=5,
    scoring_pairs=None,
    steps=20,
    warmup=2,
)
TOY = Scale(
    batches=(8, 16),
    twin_batches=(8,),
    twin_rounds=3,
    twin_steps=2,
    tokens=8,
    embed=32,
    hidden=64,
    vocab=500,
    vtfn_dim=32,
    vtfn_tokens=8,
    image_dim=64,
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
        rate = flops.measured_matmul_peak(MEASURED_MATMUL, repeats=3) / TERA
        source = f"measured: {MEASURED_MATMUL}³ float32 matmul on {device_kind}"
        return {d: {"tflops": rate * count, "source": source} for d in DTYPES}
    return {
        d: {"tflops": getattr(peak, d) * count, "source": f"table: {peak.name} {d}"} for d in DTYPES
    }


# --------------------------------------------------------------------------- training
def caption_batch(rng: np.random.Generator, batch: int, max_len: int, vocab: int):
    """Padded ids and mask of random captions of max_len/2 to max_len tokens, <S> ... </S>."""
    lengths = rng.integers(max(2, max_len // 2), max_len + 1, batch)
    mask = np.arange(max_len)[None, :] < lengths[:, None]
    words = rng.integers(len(text.SPECIALS), vocab, (batch, max_len))
    ids = np.where(mask, words, text.PAD_ID).astype(np.int32)
    ids[:, 0] = text.BOS_ID
    ids[np.arange(batch), lengths - 1] = text.EOS_ID
    return ids, mask


@dataclasses.dataclass
class TrainingCase:
    """A model, its loss, host batches and its hand FLOP count, ready to time."""

    config: ml_collections.ConfigDict
    model: nnx.Module
    loss_fn: Callable
    batches: list[dict[str, np.ndarray]]
    step_flops: flops.StepFlops
    sizes: str
    vocab_size: int
    image_dim: int | None = None  # VTFN's image features; None for I2CE


def i2ce_case(scale: Scale, dtype: str, batch: int) -> TrainingCase:
    """The paper's dual (margin) branch at ``scale``'s sizes."""
    config = i2ce_coco_margin.get_config(f"embed={scale.embed},hidden={scale.hidden},batch={batch}")
    config.data.max_len = scale.tokens
    config.model.dtype = dtype
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(DISTINCT_BATCHES):
        ids, mask = caption_batch(rng, batch, scale.tokens, scale.vocab)
        group = rng.integers(0, max(batch // 2, 1), batch).astype(np.int32)
        batches.append({"anchor_ids": ids, "anchor_mask": mask, "group": group})
    return TrainingCase(
        config,
        i2ce_model.build_model(config, scale.vocab),
        i2ce_model.make_loss_fn(config),
        batches,
        flops.i2ce_step_flops(config, scale.vocab),
        f"batch {batch}, {scale.tokens} tokens, embed {scale.embed}, hidden "
        f"{scale.hidden}, vocabulary {scale.vocab}, margin branch",
        scale.vocab,
    )


def vtfn_case(
    config: ml_collections.ConfigDict, scale: Scale, dtype: str, batch: int
) -> TrainingCase:
    """VTFN with ``config``'s text tower and the Pearson loss, one caption per image."""
    config.batch_size = batch
    config.data.max_len = scale.vtfn_tokens
    config.model.dtype = dtype
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(DISTINCT_BATCHES):
        ids, mask = caption_batch(rng, batch, scale.vtfn_tokens, scale.vocab)
        features = rng.standard_normal((batch, scale.image_dim), np.float32)
        group = np.arange(batch, dtype=np.int32)
        batches.append({"ids": ids, "mask": mask, "features": features, "group": group})
    return TrainingCase(
        config,
        vtfn_model.build_model(config, scale.vocab, scale.image_dim),
        vtfn_model.make_loss_fn(config),
        batches,
        flops.vtfn_step_flops(config, scale.image_dim),
        f"batch {batch}, {scale.vtfn_tokens} tokens, N = {scale.vtfn_dim}, "
        f"vocabulary {scale.vocab}, {scale.image_dim}-d features, Pearson loss",
        scale.vocab,
        scale.image_dim,
    )


def vtfn_gru_case(scale: Scale, dtype: str, batch: int) -> TrainingCase:
    return vtfn_case(coco_gru.get_config(f"dim={scale.vtfn_dim}"), scale, dtype, batch)


def vtfn_bow_case(scale: Scale, dtype: str, batch: int) -> TrainingCase:
    return vtfn_case(coco_bow.get_config(f"dim={scale.vtfn_dim}"), scale, dtype, batch)


# Row name -> the case at (scale, dtype, batch). The sweep runs SWEPT; the twins run all.
CASES: dict[str, Callable[[Scale, str, int], TrainingCase]] = {
    "I2CE paper scale": i2ce_case,
    "VTFN-GRU": vtfn_gru_case,
    "VTFN-BOW": vtfn_bow_case,
}
SWEPT = ("I2CE paper scale", "VTFN-GRU")


def xla_flops(compiled: jax.stages.Compiled) -> float | None:
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["flops"]) if cost and "flops" in cost else None


def process_rows(batch: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """This process's rows of a case's batch: every process_count-th one."""
    share = slice(jax.process_index(), None, jax.process_count())
    return {k: v[share] for k, v in batch.items()}


def placed_batch(trainer: Trainer, batch: Mapping[str, np.ndarray]) -> dict[str, jax.Array]:
    """A case's batch as the step's global batch (``process_rows`` on each process)."""
    return trainer.global_batch(process_rows(batch))


@dataclasses.dataclass
class PlacedSteps:
    """The library's step compiled for a case, its state and batches on the devices."""

    case: TrainingCase
    compiled: jax.stages.Compiled
    state: object
    batches: list[dict[str, jax.Array]]
    tables: dict[str, jax.Array]  # the Trainer's device tables ({}: none, batches hold rows)
    done: int = 0

    @classmethod
    def prepare(cls, case: TrainingCase) -> PlacedSteps:
        """Compiles the step (``capsim.train.Trainer``'s, over the data mesh) and places
        the batches, this process's rows of each."""
        trainer = Trainer(case.config, case.model, case.loss_fn)
        batches = [placed_batch(trainer, b) for b in case.batches]
        compiled = trainer.train_step.lower(trainer.state, batches[0], trainer.tables).compile()
        return cls(case, compiled, trainer.state, batches, trainer.tables)

    def run(self, count: int) -> dict[str, jax.Array]:
        """``count`` more steps, waited for; the last step's metrics."""
        metrics = None
        for _ in range(count):
            i, self.done = self.done, self.done + 1
            batch = self.batches[i % len(self.batches)]
            self.state, metrics = self.compiled(self.state, batch, self.tables)
        jax.block_until_ready((self.state, metrics))
        return metrics


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
