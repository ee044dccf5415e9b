"""bench/accelerator_check.py's rows against the PyTorch twins (bench/cases/torch_reference.py).

Each row is one case of bench/accelerator/training.py at one batch size, in float32:
the library's compiled step against the twin built on ``device`` ("cuda" where torch
sees a GPU) from the same weights, fed the same batches, both already on the device.
Rounds alternate the two sides (bench.harness.time_rounds) and each side waits for its
device at the end of a round; the row keeps the JAX / PyTorch ratio's median, min and
max. Both sides run float32 matmuls as TF32 on a GPU that has it: JAX's default
precision, and ``torch.set_float32_matmul_precision("high")`` here.

torch is imported here at module level: bench/accelerator_check.py imports this module
only when torch is installed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from bench.cases import torch_reference
from bench.cases.catalogue import TrainingCase
from bench.cases.placed import PlacedSteps
from bench.harness import ratio_summary, time_rounds

MIN_ROUNDS = 3


def twin_device() -> str:
    """The device of the twins: "cuda" where torch sees a GPU, else "cpu"."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure_twin(
    case: TrainingCase,
    device: str,
    *,
    steps: int,
    warmup: int,
    rounds: int,
    check_loss: bool = True,
    seconds_left: Callable[[], float] | None = None,
) -> dict:
    """Training examples/s of the JAX step and the torch twin on ``device``, alternating.

    With ``seconds_left``, fewer steps a round, then fewer rounds (MIN_ROUNDS of one step
    at least), when the warm-up steps' pace says that the rounds would not end in time.
    """
    torch.set_float32_matmul_precision("high")  # TF32 matmuls, as JAX's default on a GPU
    twin = torch_reference.twin_of(case.config, case.model, case.vocab_size, case.image_dim, device)
    losses = (
        torch_reference.initial_losses(case.model, case.loss_fn, twin, case.batches[0], device)
        if check_loss
        else (None, None)
    )
    placed = PlacedSteps.prepare(case)
    trainer = torch_reference.TorchTrainer(twin, case.config, case.config.seed)
    torch_batches = [trainer.to_device(b) for b in case.batches]

    def run_torch(count: int) -> None:
        for i in range(count):
            trainer.step(torch_batches[i % len(torch_batches)])
        synchronize(device)

    began = time.perf_counter()
    placed.run(warmup)
    run_torch(warmup)
    pace = (time.perf_counter() - began) / max(warmup, 1)  # seconds a step of both sides
    planned = (rounds, steps)
    if seconds_left is not None and pace > 0:
        fit = int(0.8 * seconds_left() / pace)  # steps a side that end in time
        steps = max(1, min(steps, fit // rounds))
        rounds = max(MIN_ROUNDS, min(rounds, fit // steps))
    seconds = time_rounds(
        {"jax": lambda _: placed.run(steps), "torch": lambda _: run_torch(steps)}, rounds
    )
    shortened = (
        f"; {rounds} rounds of {steps} step(s) instead of {planned[0]} of {planned[1]}, for the "
        "time budget"
        if (rounds, steps) != planned
        else ""
    )
    batch = case.config.batch_size
    jax_speed = batch * steps / float(np.median(seconds["jax"]))
    torch_speed = batch * steps / float(np.median(seconds["torch"]))
    return {
        "throughput": jax_speed,
        "unit": "examples/s",
        "torch_throughput": torch_speed,
        **ratio_summary(seconds["jax"], seconds["torch"]),
        "rounds": rounds,
        "steps_per_round": steps,
        "torch_device": device,
        "torch_version": torch.__version__,
        "jax_initial_loss": losses[0],
        "torch_initial_loss": losses[1],
        "note": f"{case.sizes}; PyTorch {torch_speed:,.0f} examples/s on {device}{shortened}",
    }
