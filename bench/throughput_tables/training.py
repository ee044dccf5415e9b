"""bench/throughput.py's training rows: the library's train step against its PyTorch twin.

Each row is one model's real training config (bench/cases/catalogue.py's TRAINING_MODELS),
built in both frameworks from the same weights (bench/cases/torch_reference.py) and fed
identical synthetic batches; rounds alternate the two sides (bench.harness.time_rounds).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence

import ml_collections
import numpy as np
import torch
from flax import nnx

from bench import harness
from bench.cases import torch_reference
from bench.cases.catalogue import (
    DEFAULT_SIZES,
    HostBatch,
    Sizes,
    is_vtfn,
    model_config,
    step_flops,
    synthetic_batches,
)
from bench.cases.placed import JaxRunner
from bench.harness import load_average, load_cell, ratio_cells, ratio_summary, time_rounds
from capsim.tables import format_cells
from i2ce_jax import model as i2ce_model
from vtfn_jax import model as vtfn_model


def use_every_core() -> None:
    """PyTorch's intra-op threads on every core, as JAX's CPU client uses them.

    torch is imported only through this package, after bench/__init__.py has set
    OMP_WAIT_POLICY: OpenMP reads it once, when torch loads.
    """
    torch.set_num_threads(os.cpu_count())


@dataclasses.dataclass
class TrainingPair:
    """One model in both frameworks, the torch twin started from the Flax weights."""

    name: str
    config: ml_collections.ConfigDict
    jax_model: nnx.Module
    loss_fn: Callable
    torch_model: torch.nn.Module

    def parameter_counts(self) -> tuple[int, int]:
        jax_count = sum(v.size for v in torch_reference.flax_params(self.jax_model).values())
        return jax_count, torch_reference.count_parameters(self.torch_model)


def build_pair(name: str, sizes: Sizes) -> TrainingPair:
    config = model_config(name, sizes)
    vocab_size = sizes.vocab_for(name)
    if is_vtfn(name):
        jax_model = vtfn_model.build_model(config, vocab_size, sizes.image_dim)
        loss_fn = vtfn_model.make_loss_fn(config)
    else:
        jax_model = i2ce_model.build_model(config, vocab_size)
        loss_fn = i2ce_model.make_loss_fn(config)
    image_dim = sizes.image_dim if is_vtfn(name) else None
    torch_model = torch_reference.twin_of(config, jax_model, vocab_size, image_dim)
    return TrainingPair(name, config, jax_model, loss_fn, torch_model)


def jax_runner(pair: TrainingPair) -> JaxRunner:
    return JaxRunner(pair.config, pair.jax_model, pair.loss_fn)


class TorchRunner:
    def __init__(self, pair: TrainingPair):
        self.trainer = torch_reference.TorchTrainer(pair.torch_model, pair.config, pair.config.seed)

    def __call__(self, batches: Sequence[HostBatch]) -> None:
        for batch in batches:
            self.trainer.step(batch)


def measure_training(
    name: str,
    *,
    steps: int,
    warmup: int,
    sizes: Sizes = DEFAULT_SIZES,
    rounds: int = harness.ROUNDS,
) -> dict:
    """Training examples/s of the JAX step and the torch twin on identical batches.

    Each of ``rounds`` rounds runs ``steps`` steps on each side; the row keeps
    the per-round ratio's median, min and max, the load average around it, and
    the hand-counted FLOPs per step with the FLOP/s they imply for JAX.
    """
    pair = build_pair(name, sizes)
    batches = synthetic_batches(name, pair.config, sizes)
    jax_loss, torch_loss = torch_reference.initial_losses(
        pair.jax_model, pair.loss_fn, pair.torch_model, batches[0]
    )
    jax_params, torch_params = pair.parameter_counts()
    jax_step, torch_step = jax_runner(pair), TorchRunner(pair)
    warm = [batches[i % len(batches)] for i in range(max(warmup, len(batches)))]  # every width
    jax_step(warm)
    torch_step(warm)

    def chunk(index: int) -> list[HostBatch]:
        return [batches[i % len(batches)] for i in range(index * steps, (index + 1) * steps)]

    load_start = load_average()
    seconds = time_rounds(
        {"jax": lambda i: jax_step(chunk(i)), "torch": lambda i: torch_step(chunk(i))}, rounds
    )
    load_end = load_average()
    jax_steps_per_s = steps / float(np.median(seconds["jax"]))
    torch_steps_per_s = steps / float(np.median(seconds["torch"]))
    per_step = step_flops(name, pair.config, sizes, batches)
    return {
        "name": name,
        "what": "train",
        "ours": jax_steps_per_s * sizes.batch_size,
        "reference": torch_steps_per_s * sizes.batch_size,
        **ratio_summary(seconds["jax"], seconds["torch"]),
        "rounds": rounds,
        "steps_per_round": steps,
        "flops_per_step": per_step,
        "flops_per_s": per_step * jax_steps_per_s,
        "torch_flops_per_s": per_step * torch_steps_per_s,
        "vocab_size": sizes.vocab_for(name),
        "jax_parameters": jax_params,
        "torch_parameters": torch_params,
        "jax_initial_loss": jax_loss,
        "torch_initial_loss": torch_loss,
        "load_start": load_start,
        "load_end": load_end,
    }


def training_table(rows: Sequence[Mapping]) -> str:
    """One line per training row: speeds, the ratio's spread, FLOPs and share of the peak."""
    return format_cells(
        [
            "row",
            "JAX ex/s",
            "PyTorch ex/s",
            "ratio median",
            "min",
            "max",
            "GFLOP/step",
            "JAX GFLOP/s",
            "share of peak",
            "load start / end",
        ],
        [
            [
                r["name"],
                f"{r['ours']:.0f}",
                f"{r['reference']:.0f}",
                *ratio_cells(r),
                f"{r['flops_per_step'] / 1e9:.2f}",
                f"{r['flops_per_s'] / 1e9:.1f}",
                f"{r['peak_fraction']:.0%}",
                load_cell(r),
            ]
            for r in rows
        ],
    )
