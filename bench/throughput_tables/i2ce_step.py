"""bench/throughput.py's breakdown of the paper-scale I2CE step, and its checkpoint stall."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import grain
import jax
import numpy as np
import torch
from flax import nnx

from bench.cases import flops, torch_reference
from bench.cases.catalogue import (
    DEFAULT_SIZES,
    HostBatch,
    Sizes,
    model_config,
    step_flops,
    synthetic_batches,
)
from bench.cases.i2ce_levers import i2ce_part_steps, part_inputs
from bench.harness import load_average, ratio_cells, ratio_summary, time_rounds
from bench.throughput_tables.training import TorchRunner, TrainingPair, build_pair, jax_runner
from capsim.tables import format_cells
from capsim.train import Trainer
from capsim.train.checkpoint import Checkpointer
from i2ce_jax import model as i2ce_model

PARTS_MODEL = "I2CE-paper-scale"


def _i2ce_part_runners(
    pair: TrainingPair, batch: HostBatch, steps: int, vocab_size: int
) -> dict[str, dict]:
    """(JAX, torch) runners of one part each, forward and backward, with its hand FLOPs.

    "readout": the vocabulary product and the NLL (i2ce_jax.model.sequence_nll),
    gradients for the weights and the decoder outputs. "decoder GRU": the
    decoder's masked scan (capsim.recurrence.scan_rnn), gradients for its weights,
    inputs and initial state. Both sides run every padded step here, as both do
    in the full step.
    """
    config, model, reference = pair.config, pair.jax_model, pair.torch_model
    ids, mask = batch["anchor_ids"], batch["anchor_mask"]
    size, length = ids.shape[0], ids.shape[1] - 1
    inputs = part_inputs(size, length, config.model.embed_dim, config.model.hidden_dim)
    jax_calls = i2ce_part_steps(model, batch, inputs)
    outputs, cotangent, start = inputs["outputs"], inputs["cotangent"], inputs["start"]
    targets, target_mask = ids[:, 1:], mask[:, 1:]

    def repeat_jax(call):
        def run() -> None:
            jax.block_until_ready([call() for _ in range(steps)])

        return run

    def torch_leaf(array: np.ndarray) -> torch.Tensor:
        return torch.tensor(array, requires_grad=True)

    t_outputs, t_start = torch_leaf(outputs), torch_leaf(start)
    t_inputs = torch_leaf(inputs["inputs"])
    t_targets, t_target_mask = torch.tensor(targets), torch.tensor(target_mask)
    t_cotangent = torch.tensor(cotangent)

    def torch_readout() -> None:
        for _ in range(steps):
            reference.zero_grad(set_to_none=True)
            logits = reference.readout(t_outputs)
            torch_reference.sequence_nll(logits, t_targets, t_target_mask).backward()

    def torch_decoder() -> None:
        for _ in range(steps):
            reference.zero_grad(set_to_none=True)
            out, _ = reference.decoder_cell(t_inputs, t_start[None])
            (out * t_cotangent).sum().backward()

    counts = flops.i2ce_step_flops(config, vocab_size).training_parts()
    return {
        "readout": {
            "jax": repeat_jax(jax_calls["readout"]),
            "torch": torch_readout,
            "flops": counts["readout"],
        },
        "decoder GRU": {
            "jax": repeat_jax(jax_calls["decoder GRU"]),
            "torch": torch_decoder,
            "flops": counts["decoder.input"] + counts["decoder.recurrent"],
        },
    }


def measure_i2ce_parts(*, steps: int, rounds: int, sizes: Sizes = DEFAULT_SIZES) -> list[dict]:
    """Where the paper-scale I2CE step spends its time: each part's speed on both sides.

    Rows: each part, then the whole training step, with seconds per step (median
    of alternating rounds), the JAX / PyTorch ratio and the hand-counted FLOPs.
    """
    pair = build_pair(PARTS_MODEL, sizes)
    batch = synthetic_batches(PARTS_MODEL, pair.config, sizes)[0]
    parts = _i2ce_part_runners(pair, batch, steps, sizes.vocab_for(PARTS_MODEL))
    jax_step, torch_step = jax_runner(pair), TorchRunner(pair)
    parts["whole step"] = {
        "jax": lambda: jax_step([batch] * steps),
        "torch": lambda: torch_step([batch] * steps),
        "flops": step_flops(PARTS_MODEL, pair.config, sizes, [batch]),
    }
    rows = []
    for name, part in parts.items():
        part["jax"](), part["torch"]()  # compile and warm up
        load_start = load_average()
        runners = {side: lambda i, run=part[side]: run() for side in ("jax", "torch")}
        seconds = time_rounds(runners, rounds)
        jax_s = float(np.median(seconds["jax"])) / steps
        torch_s = float(np.median(seconds["torch"])) / steps
        rows.append(
            {
                "name": f"{PARTS_MODEL} {name}",
                "what": "part",
                "jax_seconds": jax_s,
                "torch_seconds": torch_s,
                **ratio_summary(seconds["jax"], seconds["torch"]),
                "flops_per_step": part["flops"],
                "flops_per_s": part["flops"] / jax_s,
                "torch_flops_per_s": part["flops"] / torch_s,
                "load_start": load_start,
                "load_end": load_average(),
            }
        )
    whole = rows[-1]["jax_seconds"]
    for row in rows:
        row["share_of_step"] = row["jax_seconds"] / whole
    return rows


def measure_checkpoint_stall(*, rounds: int, sizes: Sizes = DEFAULT_SIZES) -> dict:
    """How long a checkpoint save holds up the paper-scale I2CE training loop.

    The trainer's save (capsim.train.checkpoint.Checkpointer, model + Adam state +
    grain iterator) returns once the arrays are copied and writes the files in
    the background; the alternative awaits the write. Alternating rounds time
    both into the same folder; the background write is awaited outside the timing.
    """
    config = model_config(PARTS_MODEL, sizes)
    model = i2ce_model.build_model(config, sizes.vocab_for(PARTS_MODEL))
    optimizer = Trainer(config, model, i2ce_model.make_loss_fn(config)).optimizer
    iterator = iter(grain.MapDataset.range(10).to_iter_dataset())
    size = sum(leaf.nbytes for leaf in jax.tree.leaves(nnx.state((model, optimizer))))
    with tempfile.TemporaryDirectory() as folder:
        checkpoints = Checkpointer(Path(folder) / "checkpoints", keep=2)
        items = dict(model=model, optimizer=optimizer, data_state=iterator.get_state(), force=True)
        checkpoints.save(0, **items)  # warm-up
        checkpoints.wait()
        steps = itertools.count(1)

        def save(awaited: bool) -> None:
            checkpoints.save(next(steps), **items)
            if awaited:
                checkpoints.wait()

        load_start = load_average()
        seconds = time_rounds(
            {"background": lambda i: save(False), "awaited": lambda i: save(True)},
            rounds,
            after=lambda name: checkpoints.wait(),
        )
        checkpoints.close()
    return {
        "name": f"{PARTS_MODEL} checkpoint save",
        "what": "checkpoint",
        "bytes": size,
        "ours": float(np.median(seconds["background"])),
        "reference": float(np.median(seconds["awaited"])),
        **ratio_summary(seconds["background"], seconds["awaited"]),
        "rounds": rounds,
        "load_start": load_start,
        "load_end": load_average(),
    }


def parts_table(rows: Sequence[Mapping]) -> str:
    """One line per part: time per step on each side, the ratio, and each side's share of peak."""
    return format_cells(
        [
            "part (forward + backward)",
            "JAX ms",
            "PyTorch ms",
            "ratio median",
            "min",
            "max",
            "GFLOP",
            "JAX share of peak",
            "PyTorch share of peak",
            "share of the JAX step",
        ],
        [
            [
                r["name"],
                f"{r['jax_seconds'] * 1e3:.0f}",
                f"{r['torch_seconds'] * 1e3:.0f}",
                *ratio_cells(r),
                f"{r['flops_per_step'] / 1e9:.1f}",
                f"{r['peak_fraction']:.0%}",
                f"{r['torch_peak_fraction']:.0%}",
                f"{r['share_of_step']:.0%}",
            ]
            for r in rows
        ],
    )
