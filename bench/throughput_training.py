"""bench/throughput.py's training rows: the library's train step against its PyTorch twin.

Each row is one model's real training config (TRAINING_MODELS), built in both
frameworks from the same weights (bench/torch_reference.py) and fed identical
synthetic batches; rounds alternate the two sides (bench.harness.time_rounds).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import torch
from flax import nnx, traverse_util

from bench import flops, harness, torch_reference
from bench.harness import load_average, ratio_summary, time_rounds
from capsim import text
from capsim.data import pipeline
from capsim.train import Trainer
from configs import coco_bow, coco_cnn, coco_gru, coco_lstm, i2ce_coco_margin
from i2ce_jax import model as i2ce_model
from vtfn_jax import model as vtfn_model

VOCAB_SIZE = 5000
IMAGE_DIM = 2048
# Caption lengths in tokens, <S> and </S> included; batches pad to the config's data.max_len.
MIN_TOKENS, MAX_TOKENS = 8, 20
FIRST_WORD_ID = len(text.SPECIALS)
DISTINCT_BATCHES = 4
# Length-bucketed rows: widths rounded up to this multiple, over 8 batches, so the mix of
# widths is close to an epoch's (with 8-20 tokens: 3 batches of 12, 2 of 16, 3 of 20).
LENGTH_MULTIPLE, BUCKETED_BATCHES = 4, 8


def _i2ce_paper() -> ml_collections.ConfigDict:
    """The paper's scale: batch 128, 20 tokens, embed 300, hidden 512, margin branch."""
    config = i2ce_coco_margin.get_config()
    config.model.embed_dim, config.model.hidden_dim, config.data.max_len = 300, 512, 20
    return config


def _length_bucketed(make_config: Callable[[], ml_collections.ConfigDict]):
    """The same model trained on length-bucketed batches (data.length_buckets=4)."""

    def config() -> ml_collections.ConfigDict:
        config = make_config()
        config.data.length_buckets = LENGTH_MULTIPLE
        return config

    return config


# name -> the model's real training config.
TRAINING_MODELS: dict[str, Callable[[], ml_collections.ConfigDict]] = {
    "I2CE-paper-scale": _i2ce_paper,
    "I2CE-default": lambda: i2ce_coco_margin.get_config(),
    "VTFN-BOW": lambda: coco_bow.get_config("dim=128"),  # N = 128, as the other towers
    "VTFN-GRU": coco_gru.get_config,
    "VTFN-LSTM": coco_lstm.get_config,
    "VTFN-CNN": coco_cnn.get_config,
}
# The recurrent rows again on length-bucketed batches, where the scan length is the lever.
TRAINING_MODELS.update(
    {
        f"{name}-bucketed": _length_bucketed(TRAINING_MODELS[name])
        for name in ("I2CE-default", "VTFN-GRU", "VTFN-LSTM")
    }
)
# Rows whose vocabulary is not VOCAB_SIZE: the paper's 10,000 and the default config's cap.
ROW_VOCAB = {"I2CE-paper-scale": 10_000, "I2CE-default": 6000, "I2CE-default-bucketed": 6000}
# Rows whose captions all fill max_len (the paper-scale shape the FLOPs are counted for).
FULL_LENGTH = {"I2CE-paper-scale"}

HostBatch = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Batch and model sizes; ``width`` shrinks every embedding/hidden size and ``vocab_size``
    overrides each row's own vocabulary (tests)."""

    batch_size: int = 128
    vocab_size: int | None = None
    image_dim: int = IMAGE_DIM
    width: int | None = None

    def vocab_for(self, name: str) -> int:
        return self.vocab_size or ROW_VOCAB.get(name, VOCAB_SIZE)


DEFAULT_SIZES = Sizes()


def use_every_core() -> None:
    """PyTorch's intra-op threads on every core, as JAX's CPU client uses them.

    torch is imported only through this package, after bench/__init__.py has set
    OMP_WAIT_POLICY: OpenMP reads it once, when torch loads.
    """
    torch.set_num_threads(os.cpu_count())


def is_vtfn(name: str) -> bool:
    return name.startswith("VTFN")


def model_config(name: str, sizes: Sizes) -> ml_collections.ConfigDict:
    config = TRAINING_MODELS[name]()
    config.batch_size = sizes.batch_size
    if sizes.width:
        for key in ("dim", "embed_dim", "hidden_dim"):
            if key in config.model:
                config.model[key] = sizes.width
    return config


def synthetic_batches(
    name: str, config: ml_collections.ConfigDict, sizes: Sizes, seed: int = 0
) -> list[HostBatch]:
    """A few host batches shaped as the model's input pipeline yields them."""
    rng = np.random.default_rng(seed)
    batch_size, max_len = sizes.batch_size, config.data.max_len
    shortest = max_len if name in FULL_LENGTH else MIN_TOKENS
    multiple = config.data.get("length_buckets", 0)
    count = BUCKETED_BATCHES if multiple else DISTINCT_BATCHES
    all_lengths = rng.integers(shortest, min(MAX_TOKENS, max_len) + 1, count * batch_size)
    widths = np.full(count, max_len)
    if multiple:  # batches as capsim.data.pipeline.LengthBuckets forms them, cut to width
        buckets = pipeline.LengthBuckets(all_lengths, multiple, max_len)
        order = buckets.group(np.arange(len(all_lengths)), batch_size, rng)
        all_lengths = all_lengths[order]
        widths = buckets.rounded(order).reshape(count, batch_size).max(axis=1)
    batches = []
    for lengths, width in zip(all_lengths.reshape(count, batch_size), widths, strict=True):
        mask = np.arange(width)[None, :] < lengths[:, None]
        words = rng.integers(FIRST_WORD_ID, sizes.vocab_for(name), (batch_size, width))
        ids = np.where(mask, words, text.PAD_ID).astype(np.int32)
        ids[:, 0] = text.BOS_ID
        ids[np.arange(batch_size), lengths - 1] = text.EOS_ID
        if is_vtfn(name):
            features = rng.standard_normal((batch_size, sizes.image_dim), np.float32)
            group = np.arange(batch_size, dtype=np.int32)  # one caption per image, as in the paper
            batches.append({"ids": ids, "mask": mask, "features": features, "group": group})
        else:
            # Captions of the same image meet in a batch: about two per image.
            group = rng.integers(0, max(batch_size // 2, 1), batch_size).astype(np.int32)
            batches.append({"anchor_ids": ids, "anchor_mask": mask, "group": group})
    return batches


def flax_params(model: nnx.Module) -> dict[str, np.ndarray]:
    """The model's parameters as dotted paths, e.g. ``text.cell.dense_i.kernel``."""
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    flat = traverse_util.flatten_dict(pure)  # paths hold ints for nnx.List items (CNN convs)
    return {".".join(map(str, k)): np.asarray(v) for k, v in flat.items()}


@dataclasses.dataclass
class TrainingPair:
    """One model in both frameworks, the torch twin started from the Flax weights."""

    name: str
    config: ml_collections.ConfigDict
    jax_model: nnx.Module
    loss_fn: Callable
    torch_model: torch.nn.Module

    def parameter_counts(self) -> tuple[int, int]:
        jax_count = sum(v.size for v in flax_params(self.jax_model).values())
        return jax_count, torch_reference.count_parameters(self.torch_model)


def build_pair(name: str, sizes: Sizes) -> TrainingPair:
    config = model_config(name, sizes)
    vocab_size = sizes.vocab_for(name)
    if is_vtfn(name):
        jax_model = vtfn_model.build_model(config, vocab_size, sizes.image_dim)
        loss_fn = vtfn_model.make_loss_fn(config)
        torch_model = torch_reference.VTFNReference(config, vocab_size, sizes.image_dim)
    else:
        jax_model = i2ce_model.build_model(config, vocab_size)
        loss_fn = i2ce_model.make_loss_fn(config)
        torch_model = torch_reference.I2CEReference(config, vocab_size)
    torch_reference.copy_flax_params(torch_model, flax_params(jax_model))
    return TrainingPair(name, config, jax_model, loss_fn, torch_model)


def initial_losses(pair: TrainingPair, batch: HostBatch, seed: int = 0) -> tuple[float, float]:
    """Both losses on one batch before training, dropout off and the same permutation."""
    key = jax.random.key(seed)
    perm = np.asarray(jax.random.permutation(key, len(batch["group"])))
    pair.jax_model.eval()
    jax_batch = {k: jnp.asarray(v) for k, v in batch.items()}
    jax_loss, _ = nnx.jit(pair.loss_fn)(pair.jax_model, jax_batch, key)
    pair.jax_model.train()
    pair.torch_model.eval()
    with torch.no_grad():
        tensors = {k: torch.from_numpy(v) for k, v in batch.items()}
        torch_loss = pair.torch_model.loss(tensors, torch.tensor(perm, dtype=torch.long))
    return float(jax_loss), float(torch_loss)


class JaxRunner:
    """The library's train step: capsim.train.Trainer, as the papers' trainings build it."""

    def __init__(self, pair: TrainingPair):
        self.trainer = Trainer(pair.config, pair.jax_model, pair.loss_fn)

    def __call__(self, batches: Sequence[HostBatch]) -> None:
        metrics = None
        for host_batch in batches:
            metrics = self.trainer.step(self.trainer.global_batch(host_batch))
        jax.block_until_ready((self.trainer.state, metrics))


class TorchRunner:
    def __init__(self, pair: TrainingPair):
        self.trainer = torch_reference.TorchTrainer(pair.torch_model, pair.config, pair.config.seed)

    def __call__(self, batches: Sequence[HostBatch]) -> None:
        for batch in batches:
            self.trainer.step(batch)


def step_flops(
    name: str, config: ml_collections.ConfigDict, sizes: Sizes, batches: Sequence[HostBatch]
) -> float:
    """Hand-counted model FLOPs of one training step (bench/flops.py) at the width the batches
    are padded to; the mean over ``batches`` when length buckets give them several widths."""
    counts = []
    for batch in batches:
        at_width = config.copy_and_resolve_references()
        at_width.data.max_len = batch["mask" if is_vtfn(name) else "anchor_mask"].shape[1]
        if is_vtfn(name):
            counts.append(flops.vtfn_step_flops(at_width, sizes.image_dim).training)
        else:
            counts.append(flops.i2ce_step_flops(at_width, sizes.vocab_for(name)).training)
    return float(np.mean(counts))


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
    jax_loss, torch_loss = initial_losses(pair, batches[0])
    jax_params, torch_params = pair.parameter_counts()
    jax_runner, torch_runner = JaxRunner(pair), TorchRunner(pair)
    warm = [batches[i % len(batches)] for i in range(max(warmup, len(batches)))]  # every width
    jax_runner(warm)
    torch_runner(warm)

    def chunk(index: int) -> list[HostBatch]:
        return [batches[i % len(batches)] for i in range(index * steps, (index + 1) * steps)]

    load_start = load_average()
    seconds = time_rounds(
        {"jax": lambda i: jax_runner(chunk(i)), "torch": lambda i: torch_runner(chunk(i))}, rounds
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
    lines = [
        "| row | JAX ex/s | PyTorch ex/s | ratio median | min | max | GFLOP/step | JAX GFLOP/s "
        "| share of peak | load start / end |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {r['name']} | {r['ours']:.0f} | {r['reference']:.0f} | {r['ratio_median']:.2f} | "
        f"{r['ratio_min']:.2f} | {r['ratio_max']:.2f} | {r['flops_per_step'] / 1e9:.2f} | "
        f"{r['flops_per_s'] / 1e9:.1f} | {r['peak_fraction']:.0%} | "
        f"{r['load_start']:.2f} / {r['load_end']:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)
