"""Training and scoring throughput against reference implementations, side by side in one run.

    python bench/throughput.py [--steps 10] [--rounds 5] [--warmup 3] [--only train|score]

Training: examples/s of the library's real jit-compiled step (capsim.train.loop.
capsim.train.Trainer's step over the data mesh) against a PyTorch
twin of the same model (bench/torch_reference.py: same sizes, same parameter
count, same loss, same optimizer, started from the same weights) for I2CE at the
paper's scale and at the default config, and VTFN's text towers. Both consume
the same synthetic batches; each of ``--rounds`` rounds runs ``--steps`` steps
per side, alternating who goes first, after warmup (JAX compilation excluded).
Each row also has its hand-counted FLOPs per step (bench/flops.py), the FLOP/s
that gives, and its share of the machine's matmul peak measured in the same run.
The trainers' input pipelines are timed too, on a COCO-sized synthetic corpus,
against a per-example design and against the fastest training step.
Scoring: captions/s of I2CEScorer.compute_score and of capsim's Bleu(4)+CiderD
against pycocoevalcap's Bleu(4)+Cider on the same Flickr8k-Expert candidates
with 5 references each, using the packaged I2CE model; pycocoevalcap both as
users run it (Java PTBTokenizer first) and on pre-tokenised text.

Every ratio is taken per round and reported as median, min and max, with the
load average around it. Writes bench/results/throughput.json and the
"## Throughput" and "## Scoring throughput" sections of bench/RESULTS.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# configs/ is used from the clone, not installed: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import os

# Before torch (and its OpenMP runtime) loads. On a shared, oversubscribed CPU,
# OpenMP threads that spin-wait at every barrier make torch wait on other jobs
# (measured here: 100x slower GRU steps); sleeping waits measure the model, not
# the neighbours. An OMP_WAIT_POLICY set by the caller wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import contextlib
import dataclasses
import functools
import io
import itertools
import json
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import flops
import grain
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import torch
import torch_reference
from flax import nnx, traverse_util
from pycocoevalcap.bleu.bleu import Bleu as CocoBleu
from pycocoevalcap.cider.cider import Cider as CocoCider
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

from capsim import text
from capsim.data import corpus as corpus_lib
from capsim.data import pipeline
from capsim.data.pipeline import READ_OPTIONS, training_dataset
from capsim.encoders import scan_rnn
from capsim.eval.ngram import Bleu, CiderD
from capsim.train import Trainer
from capsim.train.checkpoint import Checkpointer
from configs import coco_bow, coco_cnn, coco_gru, coco_lstm, i2ce_coco_margin
from i2ce_jax import model as i2ce_model
from i2ce_jax import train as i2ce_train
from i2ce_jax.scorer import I2CEScorer
from vtfn_jax import model as vtfn_model
from vtfn_jax import train as vtfn_train
from vtfn_jax.features import ARRAY_RECORD_FILE, ArrayRecordFeatures, FeatureStore

import minilm
from results_md import update_section

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_JSON = BENCH_DIR / "results" / "throughput.json"
SECTION = "## Throughput"
GOLDEN_FILE = (
    BENCH_DIR.parents[1] / "shared" / "data" / "golden" / "pycocoevalcap_flickr8k_expert.json"
)

VOCAB_SIZE = 5000
IMAGE_DIM = 2048
# Caption lengths in tokens, <S> and </S> included; batches pad to the config's data.max_len.
MIN_TOKENS, MAX_TOKENS = 8, 20
FIRST_WORD_ID = len(text.SPECIALS)
DISTINCT_BATCHES = 4
# Length-bucketed rows: widths rounded up to this multiple, over 8 batches, so the mix of
# widths is close to an epoch's (with 8-20 tokens: 3 batches of 12, 2 of 16, 3 of 20).
LENGTH_MULTIPLE, BUCKETED_BATCHES = 4, 8
ROUNDS = 5
SCORING_SECTION = "## Scoring throughput"
BLEU_ORDER = 4
COCO_IMAGES = 123_287  # COCO 2014 train + val, the images VTFN trains on at scale
MATMUL_SIZE = 2048  # the peak: a 2048 x 2048 x 2048 float32 product, timed in the same run


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
        self.step = 0

    def __call__(self, batches: Sequence[HostBatch]) -> None:
        metrics = None
        for host_batch in batches:
            metrics = self.trainer.step(self.trainer.global_batch(host_batch), self.step)
            self.step += 1
        jax.block_until_ready((self.trainer.state, metrics))


class TorchRunner:
    def __init__(self, pair: TrainingPair):
        self.trainer = torch_reference.TorchTrainer(pair.torch_model, pair.config, pair.config.seed)

    def __call__(self, batches: Sequence[HostBatch]) -> None:
        for batch in batches:
            self.trainer.step(batch)


def time_rounds(
    runners: Mapping[str, Callable[[int], None]],
    rounds: int,
    *,
    before: Callable[[str], None] | None = None,
    after: Callable[[str], None] | None = None,
) -> dict[str, list]:
    """Seconds of each runner per round; ``runner(round_index)`` does one round's work.

    Rounds alternate the runners (who goes first swaps each round), so a change
    in machine load falls on both sides; ratios are taken per round.
    ``before(name)`` and ``after(name)`` run around each runner, off the clock.
    """
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    names = list(runners)
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            if before:
                before(name)
            began = time.perf_counter()
            runners[name](index)
            seconds[name].append(time.perf_counter() - began)
            if after:
                after(name)
    return seconds


def ratio_summary(ours: Sequence[float], reference: Sequence[float]) -> dict[str, float]:
    """Per-round speed ratios (reference seconds / our seconds): median, min and max."""
    ratios = np.asarray(reference) / np.asarray(ours)
    return {
        "ratio_median": float(np.median(ratios)),
        "ratio_min": float(ratios.min()),
        "ratio_max": float(ratios.max()),
    }


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
    name: str, *, steps: int, warmup: int, sizes: Sizes = Sizes(), rounds: int = ROUNDS
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

    load_start = os.getloadavg()[0]
    seconds = time_rounds(
        {"jax": lambda i: jax_runner(chunk(i)), "torch": lambda i: torch_runner(chunk(i))}, rounds
    )
    load_end = os.getloadavg()[0]
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


PARTS_MODEL = "I2CE-paper-scale"


def _i2ce_part_runners(
    pair: TrainingPair, batch: HostBatch, steps: int, vocab_size: int
) -> dict[str, dict]:
    """(JAX, torch) runners of one part each, forward and backward, with its hand FLOPs.

    "readout": the vocabulary product and the NLL (i2ce_jax.model.sequence_nll),
    gradients for the weights and the decoder outputs. "decoder GRU": the
    decoder's masked scan (capsim.encoders.scan_rnn), gradients for its weights,
    inputs and initial state. Both sides run every padded step here, as both do
    in the full step.
    """
    config, model, reference = pair.config, pair.jax_model, pair.torch_model
    ids, mask = batch["anchor_ids"], batch["anchor_mask"]
    size, length = ids.shape[0], ids.shape[1] - 1
    embed, hidden = config.model.embed_dim, config.model.hidden_dim
    rng = np.random.default_rng(0)

    def small_normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, np.float32) * 0.1

    outputs, cotangent = small_normal(size, length, hidden), small_normal(size, length, hidden)
    inputs, start = small_normal(size, length, embed), small_normal(size, hidden)
    targets, target_mask, step_mask = ids[:, 1:], mask[:, 1:], mask[:, :-1]
    readout_def, readout_params = nnx.split(model.readout)
    cell_def, cell_params = nnx.split(model.decoder_cell)

    @jax.jit
    def jax_readout(params, outputs):
        def nll(params, outputs):
            logits = nnx.merge(readout_def, params)(outputs)
            return i2ce_model.sequence_nll(logits, targets, target_mask)

        return jax.grad(nll, argnums=(0, 1))(params, outputs)

    @jax.jit
    def jax_decoder(params, inputs, start):
        def total(params, inputs, start):
            cell = nnx.merge(cell_def, params)
            _, out = scan_rnn(cell, inputs, step_mask, start)
            return jnp.sum(out * cotangent)

        return jax.grad(total, argnums=(0, 1, 2))(params, inputs, start)

    def repeat_jax(fn, *args):
        def run() -> None:
            jax.block_until_ready([fn(*args) for _ in range(steps)])

        return run

    def torch_leaf(array: np.ndarray) -> torch.Tensor:
        return torch.tensor(array, requires_grad=True)

    t_outputs, t_inputs, t_start = torch_leaf(outputs), torch_leaf(inputs), torch_leaf(start)
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
            "jax": repeat_jax(jax_readout, readout_params, jnp.asarray(outputs)),
            "torch": torch_readout,
            "flops": counts["readout"],
        },
        "decoder GRU": {
            "jax": repeat_jax(jax_decoder, cell_params, jnp.asarray(inputs), jnp.asarray(start)),
            "torch": torch_decoder,
            "flops": counts["decoder.input"] + counts["decoder.recurrent"],
        },
    }


def measure_i2ce_parts(*, steps: int, rounds: int, sizes: Sizes = Sizes()) -> list[dict]:
    """Where the paper-scale I2CE step spends its time: each part's speed on both sides.

    Rows: each part, then the whole training step, with seconds per step (median
    of alternating rounds), the JAX / PyTorch ratio and the hand-counted FLOPs.
    """
    pair = build_pair(PARTS_MODEL, sizes)
    batch = synthetic_batches(PARTS_MODEL, pair.config, sizes)[0]
    parts = _i2ce_part_runners(pair, batch, steps, sizes.vocab_for(PARTS_MODEL))
    jax_step, torch_step = JaxRunner(pair), TorchRunner(pair)
    parts["whole step"] = {
        "jax": lambda: jax_step([batch] * steps),
        "torch": lambda: torch_step([batch] * steps),
        "flops": step_flops(PARTS_MODEL, pair.config, sizes, [batch]),
    }
    rows = []
    for name, part in parts.items():
        part["jax"](), part["torch"]()  # compile and warm up
        load_start = os.getloadavg()[0]
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
                "load_end": os.getloadavg()[0],
            }
        )
    whole = rows[-1]["jax_seconds"]
    for row in rows:
        row["share_of_step"] = row["jax_seconds"] / whole
    return rows


def measure_checkpoint_stall(*, rounds: int, sizes: Sizes = Sizes()) -> dict:
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

        load_start = os.getloadavg()[0]
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
        "load_end": os.getloadavg()[0],
    }


def parts_table(rows: Sequence[Mapping]) -> str:
    """One line per part: time per step on each side, the ratio, and each side's share of peak."""
    lines = [
        "| part (forward + backward) | JAX ms | PyTorch ms | ratio median | min | max | GFLOP "
        "| JAX share of peak | PyTorch share of peak | share of the JAX step |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['name']} | {r['jax_seconds'] * 1e3:.0f} | {r['torch_seconds'] * 1e3:.0f} | "
        f"{r['ratio_median']:.2f} | {r['ratio_min']:.2f} | {r['ratio_max']:.2f} | "
        f"{r['flops_per_step'] / 1e9:.1f} | {r['peak_fraction']:.0%} | "
        f"{r['torch_peak_fraction']:.0%} | {r['share_of_step']:.0%} |"
        for r in rows
    ]
    return "\n".join(lines)


def synthetic_corpus(
    num_images: int, captions_per_image: int, max_len: int, seed: int = 0
) -> corpus_lib.EncodedCorpus:
    """An encoded corpus of COCO's shape (random ids) for input-pipeline timing."""
    rng = np.random.default_rng(seed)
    count = num_images * captions_per_image
    lengths = rng.integers(MIN_TOKENS, min(MAX_TOKENS, max_len) + 1, count)
    mask = np.arange(max_len)[None, :] < lengths[:, None]
    ids = np.where(mask, rng.integers(FIRST_WORD_ID, VOCAB_SIZE, (count, max_len)), text.PAD_ID)
    image_index = np.repeat(np.arange(num_images, dtype=np.int32), captions_per_image)
    groups = list(np.arange(count).reshape(num_images, captions_per_image))
    records = [None] * count  # only len() is read
    return corpus_lib.EncodedCorpus(
        records,
        ids.astype(np.int32),
        mask,
        image_index,
        [str(k) for k in range(num_images)],
        groups,
    )


def _per_example_dataset(split: corpus_lib.CaptionSplit, with_features: bool, batch_size: int):
    """The previous pipeline, as the reference: one Python call per example, then grain's batch.

    VTFN examples carried a caption, its image's features and group; I2CE
    examples an anchor and a random other caption of its image.
    """
    corpus = split.corpus

    def example(row: int, rng: np.random.Generator) -> HostBatch:
        image = corpus.image_index[row]
        if with_features:
            return {
                "ids": corpus.ids[row],
                "mask": corpus.mask[row],
                "features": split.features[image],
                "group": np.int32(image),
            }
        siblings = corpus.captions_of_image[image]
        similar = int(rng.choice(siblings[siblings != row]))
        return {
            "anchor_ids": corpus.ids[row],
            "anchor_mask": corpus.mask[row],
            "similar_ids": corpus.ids[similar],
            "similar_mask": corpus.mask[similar],
            "group": image,
        }

    dataset = grain.MapDataset.range(len(corpus)).seed(0).shuffle().repeat(None)
    batched = dataset.random_map(example).batch(batch_size, drop_remainder=True)
    return batched.to_iter_dataset(READ_OPTIONS)


def _time_pipelines(
    ours: grain.IterDataset, reference: grain.IterDataset, *, batches: int, rounds: int
) -> dict:
    """Examples/s of two pipelines drained in alternating rounds of ``batches`` batches.

    Each round starts a fresh iterator and takes its first batch before the clock
    starts, then closes it, so neither side's background prefetch threads run on
    during the other's round.
    """
    datasets = {"ours": ours, "reference": reference}
    size = len(next(iter(next(iter(ours)).values())))  # every batch has the same size
    live: dict[str, grain.DatasetIterator] = {}

    def start(name: str) -> None:
        live[name] = iter(datasets[name])
        next(live[name])  # thread start-up and the epoch's order, off the clock

    def drain(name: str) -> None:
        for _ in range(batches):
            next(live[name])

    load_start = os.getloadavg()[0]
    seconds = time_rounds(
        {name: lambda i, name=name: drain(name) for name in datasets},
        rounds,
        before=start,
        after=lambda name: live.pop(name).close(),
    )
    return {
        "ours": batches * size / float(np.median(seconds["ours"])),
        "reference": batches * size / float(np.median(seconds["reference"])),
        **ratio_summary(seconds["ours"], seconds["reference"]),
        "rounds": rounds,
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
    }


def measure_pipeline(
    *, batch_size: int, batches: int, rounds: int = ROUNDS, num_images: int = COCO_IMAGES
) -> list[dict]:
    """Examples/s of the trainers' input pipelines on a COCO-sized synthetic corpus.

    VTFN gathers captions and 2048-d float32 features of ``num_images`` images
    (in memory, as vtfn_jax.data holds them); I2CE gathers anchor and similar
    captions. Each is set against the previous design (a Python call per
    example). The VTFN features are also written once to an ArrayRecord store
    in a temporary directory and read from there batch by batch
    (vtfn_jax.features.ArrayRecordFeatures), set against the in-memory path.
    """
    captions = synthetic_corpus(num_images, 5, max_len=24)
    features = np.random.default_rng(1).standard_normal((num_images, IMAGE_DIM), np.float32)
    split = corpus_lib.CaptionSplit(captions, features)

    def batched(make_batch: Callable) -> grain.IterDataset:
        return training_dataset(len(captions), make_batch, global_batch_size=batch_size, seed=0)

    comparisons = [
        (
            "VTFN-pipeline",
            "VTFN input pipeline (features in memory): batch gathering vs one Python call per example",
            batched(vtfn_train.make_batch_fn(split, pivot=False)),
            _per_example_dataset(split, True, batch_size),
        ),
        (
            "I2CE-pipeline",
            "I2CE input pipeline: batch gathering vs one Python call per example",
            batched(i2ce_train.make_batch_fn(captions)),
            _per_example_dataset(split, False, batch_size),
        ),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as store_dir:
        ids = [str(k) for k in range(num_images)]
        FeatureStore.from_arrays(ids, features).save(store_dir, layout="array_record")
        on_disk = ArrayRecordFeatures(Path(store_dir) / ARRAY_RECORD_FILE, IMAGE_DIM)
        disk_split = corpus_lib.CaptionSplit(captions, on_disk)
        comparisons.append(
            (
                "VTFN-pipeline-ArrayRecord",
                "VTFN input pipeline reading features from an ArrayRecord store vs from memory",
                batched(vtfn_train.make_batch_fn(disk_split, pivot=False)),
                batched(vtfn_train.make_batch_fn(split, pivot=False)),
            )
        )
        for name, description, ours, reference in comparisons:
            timing = _time_pipelines(ours, reference, batches=batches, rounds=rounds)
            rows.append(
                {
                    "name": name,
                    "what": "pipeline",
                    "description": description,
                    **timing,
                    "images": num_images,
                }
            )
    return rows


def load_golden_pairs(path: Path, limit: int | None) -> tuple[dict, dict]:
    """pycocoevalcap-style gts/res from the first ``limit`` rows of the golden file."""
    rows = json.loads(path.read_text(encoding="utf-8"))["rows"][:limit]
    gts = {row["key"]: list(row["references"]) for row in rows}
    res = {row["key"]: [row["candidate"]] for row in rows}
    return gts, res


def untrained_scorer(gts: Mapping, res: Mapping, width: int | None = None) -> I2CEScorer:
    """An I2CE scorer with the default model sizes and a vocabulary of these captions."""
    captions = [c for refs in gts.values() for c in refs] + [
        c for cands in res.values() for c in cands
    ]
    vocab = text.Vocab.build(text.tokenize(c) for c in captions)
    config = i2ce_coco_margin.get_config()
    if width:
        config.model.embed_dim = config.model.hidden_dim = width
    model = i2ce_model.build_model(config, len(vocab))
    return I2CEScorer(model.encoder, vocab, pooling=config.scorer.pooling)


def _coco_bleu_cider(gts: Mapping, res: Mapping) -> None:
    with contextlib.redirect_stdout(io.StringIO()):  # pycocoevalcap prints its BLEU counts
        CocoBleu(BLEU_ORDER).compute_score(gts, res, verbose=0)
    CocoCider().compute_score(gts, res)


def _coco_as_users_run_it(gts: Mapping, res: Mapping) -> None:
    """pycocoevalcap's usual recipe: its Java PTBTokenizer on the raw text, then Bleu+Cider."""
    tokenizer = PTBTokenizer()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        gts_tok = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in gts.items()})
        res_tok = tokenizer.tokenize({k: [{"caption": c} for c in v] for k, v in res.items()})
    _coco_bleu_cider(gts_tok, res_tok)


def _capsim_bleu_cider(gts: Mapping, res: Mapping) -> None:
    Bleu(BLEU_ORDER).compute_score(gts, res)
    CiderD().compute_score(gts, res)


def _pretokenised(captions: Mapping) -> dict:
    """The text pycocoevalcap's PTBTokenizer returns (capsim's tokenizer matches it)."""
    return {k: [" ".join(text.tokenize_for_metrics(c)) for c in v] for k, v in captions.items()}


def measure_scoring(
    gts: Mapping, res: Mapping, *, rounds: int = ROUNDS, scorer: I2CEScorer | None = None
) -> list[dict]:
    """Captions/s of the I2CE scorer (and capsim's n-gram metrics) against pycocoevalcap.

    Each round times every scorer once on all candidates, in alternating order;
    a row's ratio is taken per round, then summarised as median, min and max.
    The warmup round compiles every length bucket the candidates need.
    """
    scorer = scorer or I2CEScorer.pretrained()
    gts_tok, res_tok = _pretokenised(gts), _pretokenised(res)
    runners = {
        "i2ce": lambda: scorer.compute_score(gts, res),
        "capsim_pretok": lambda: _capsim_bleu_cider(gts_tok, res_tok),
        "coco_pretok": lambda: _coco_bleu_cider(gts_tok, res_tok),
    }
    java = shutil.which("java") is not None
    if java:
        runners["coco_ptb"] = lambda: _coco_as_users_run_it(gts, res)
    if minilm.available():
        runners["minilm"] = functools.partial(minilm.MiniLMScorer().compute_score, gts, res)
    for run in runners.values():
        run()
    load_start = os.getloadavg()[0]
    seconds = time_rounds({name: lambda i, run=run: run() for name, run in runners.items()}, rounds)
    load_end = os.getloadavg()[0]
    pairs = [
        (
            "I2CE-score-vs-coco-ptb",
            "i2ce",
            "coco_ptb",
            "I2CE scorer (packaged model, raw text) vs pycocoevalcap PTBTokenizer (Java) + Bleu(4) + Cider, as users run it",
        ),
        (
            "I2CE-score-vs-coco-pretokenised",
            "i2ce",
            "coco_pretok",
            "I2CE scorer (packaged model, raw text) vs pycocoevalcap Bleu(4) + Cider on pre-tokenised text",
        ),
        (
            "I2CE-score-vs-MiniLM",
            "i2ce",
            "minilm",
            "I2CE scorer (packaged model) vs all-MiniLM-L6-v2 top-3 cosine (sentence-transformers, "
            "CPU torch), both on raw text, each distinct sentence encoded once",
        ),
        (
            "capsim-ngram-vs-coco-pretokenised",
            "capsim_pretok",
            "coco_pretok",
            "capsim Bleu(4) + CIDEr-D vs pycocoevalcap Bleu(4) + Cider, both on pre-tokenised text",
        ),
    ]
    rows = []
    for name, ours, reference, description in pairs:
        if reference not in seconds:
            why = minilm.INSTALL_HINT if reference == "minilm" else "no Java for the PTBTokenizer"
            print(f"{name}: skipped ({why})")
            continue
        rows.append(
            {
                "name": name,
                "what": "score",
                "description": description,
                "ours": len(res) / float(np.median(seconds[ours])),
                "reference": len(res) / float(np.median(seconds[reference])),
                **ratio_summary(seconds[ours], seconds[reference]),
                "rounds": rounds,
                "candidates": len(res),
                "load_start": load_start,
                "load_end": load_end,
            }
        )
    return rows


def scoring_table(rows: Sequence[Mapping]) -> str:
    lines = [
        "| row | ours (captions/s) | reference (captions/s) | ratio median | min | max | load start / end |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {r['name']} | {r['ours']:.0f} | {r['reference']:.0f} | {r['ratio_median']:.2f} | "
        f"{r['ratio_min']:.2f} | {r['ratio_max']:.2f} | {r['load_start']:.2f} / {r['load_end']:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)


def write_scoring_results(command: str, rows: list[dict], model: str) -> str:
    """The "## Scoring throughput" section, and the score rows of throughput.json."""
    table = scoring_table(rows)
    descriptions = "\n".join(f"- `{r['name']}`: {r['description']}." for r in rows)
    n = rows[0]
    section = f"""{SCORING_SECTION}

Command: `{command}`

All {n["candidates"]} Flickr8k-Expert (image, candidate) pairs with their 5 references; the
I2CE model is the packaged `{model}` model, which deduplicates sentences and encodes each
once. Each of {n["rounds"]} rounds times every scorer once (alternating order) after a warmup
round; the ratio is ours / reference captions/s per round, summarised as median, min and max.
The machine is shared (2 cores): the load average at the start and the end is in the table.

{descriptions}

{table}
"""
    update_section(SCORING_SECTION, section)
    previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {"rows": []}
    kept = [
        r
        for r in previous["rows"]
        if r.get("what") != "score" and "captions/s" not in r.get("what", "")
    ]
    previous["rows"] = kept + rows
    previous["scoring_command"] = command
    RESULTS_JSON.write_text(json.dumps(previous, indent=2) + "\n")
    return table


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


def machine_facts() -> dict:
    return {
        "cpu_cores": os.cpu_count(),
        "platform": platform.platform(),
        "jax": jax.__version__,
        "jax_devices": jax.device_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
    }


def pipeline_table(rows: Sequence[Mapping]) -> str:
    """One line per input pipeline: examples/s, the gain over per-example maps, the headroom."""
    lines = [
        "| row | ours ex/s | reference ex/s | ratio median | min | max "
        "| headroom over the fastest step | load start / end |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {r['name']} | {r['ours']:.0f} | {r['reference']:.0f} | {r['ratio_median']:.2f} | "
        f"{r['ratio_min']:.2f} | {r['ratio_max']:.2f} | {r['headroom']:.1f}x | "
        f"{r['load_start']:.2f} / {r['load_end']:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)


def write_training_results(
    command: str,
    settings: dict,
    machine: dict,
    peak: dict,
    rows: list[dict],
    parts: list[dict],
    stall: dict,
    pipeline_rows: list[dict],
) -> str:
    """The "## Throughput" section, and the training, part and pipeline rows of throughput.json."""
    table = training_table(rows)
    fastest = max(rows, key=lambda r: r["ours"])
    pipeline_notes = "\n".join(f"- `{r['name']}`: {r['description']}." for r in pipeline_rows)
    params = "; ".join(
        f"{r['name']} {r['jax_parameters']:,} / {r['torch_parameters']:,}" for r in rows
    )
    losses = "; ".join(
        f"{r['name']} {r['jax_initial_loss']:.5f} / {r['torch_initial_loss']:.5f}" for r in rows
    )
    m, st = machine, settings
    section = f"""{SECTION}

Command: `{command}`

- Machine: {m["cpu_cores"]} CPU cores ({m["platform"]}), shared with other jobs, so only
  figures measured side by side mean anything. JAX {m["jax"]} on {m["jax_devices"]} device;
  torch {m["torch"]} with {m["torch_threads"]} threads, OMP_WAIT_POLICY={m["omp_wait_policy"]}
  (see the script).
- Peak: the fastest of 10 {MATMUL_SIZE}x{MATMUL_SIZE}x{MATMUL_SIZE} float32 matmuls in JAX,
  measured in this run before and after the rows: {peak["before"] / 1e9:.0f} and
  {peak["after"] / 1e9:.0f} GFLOP/s; the share of peak uses the higher.
- Training: {st["rounds"]} alternating rounds of {st["steps"]} steps per side after
  {st["warmup"]} warmup steps (JAX compilation excluded), batch {st["batch_size"]}. Ratio =
  JAX / PyTorch examples/s per round (above 1: JAX is faster); median, min and max over the
  rounds, with the load average before and after the row. JAX runs the library's jit-compiled
  `capsim.train.Trainer`'s step over the data mesh; the reference is the PyTorch twin in
  `bench/torch_reference.py` (same sizes, weights, loss and optimizer; packed RNNs, so PAD steps
  are skipped there).
- Batches: synthetic captions of {MIN_TOKENS}-{MAX_TOKENS} tokens padded to the config's max_len,
  vocabulary {VOCAB_SIZE}, {IMAGE_DIM}-d features; `I2CE-paper-scale` is the paper's scale (every
  caption 20 tokens, embed 300, hidden 512, vocabulary 10,000, margin branch) and `I2CE-default`
  the default config (configs/i2ce_coco_margin.py sizes, vocabulary cap 6,000).
- FLOPs: matrix products counted by hand from the shapes (bench/flops.py), forward and backward;
  JAX GFLOP/s = FLOPs per step x JAX steps/s (median round).

{table}

Where the paper-scale I2CE step spends its time: each part alone, forward and backward, on the
same batch in both frameworks ({st["part_steps"]} step(s) per round, {st["rounds"]} alternating
rounds; `measure_i2ce_parts`). The readout is the [B*19, 512] x [512, 10,000] vocabulary product
with its NLL; the decoder GRU is the masked scan over 19 steps. Shares of peak use the same
in-run peak as the table above.

{parts_table(parts)}

Checkpoint saves (`measure_checkpoint_stall`): saving the paper-scale I2CE state
({stall["bytes"] / 1e6:.0f} MB: model, Adam moments, grain iterator) holds the training loop
{stall["ours"] * 1e3:.0f} ms now that the files are written in the background, against
{stall["reference"] * 1e3:.0f} ms when the write is awaited: {stall["ratio_median"]:.1f}x less
(min {stall["ratio_min"]:.1f}, max {stall["ratio_max"]:.1f}, {stall["rounds"]} alternating
rounds, load {stall["load_start"]:.2f} / {stall["load_end"]:.2f}).

Parameters, JAX / torch: {params}.
Loss on the first batch from the same weights, JAX / torch: {losses}.

Input pipelines (`capsim.data.pipeline.training_dataset` with the trainers' `make_batch_fn`s) on
a synthetic corpus of COCO's size ({COCO_IMAGES:,} images, 5 captions each; VTFN with their
{IMAGE_DIM}-d float32 features), {st["pipeline_batches"]} batches of {st["batch_size"]} per
round, {st["rounds"]} alternating rounds. The `-pipeline` rows set batch gathering against the
previous design (one Python call per example, then grain's batch); the ArrayRecord row reads the
features from an ArrayRecord store written once to a temporary directory
(`vtfn_jax.features.ArrayRecordFeatures`) against the same pipeline reading them from memory.
Headroom = our examples/s over the fastest training step's JAX examples/s in the table above
({fastest["name"]}, {fastest["ours"]:.0f}).

{pipeline_notes}

{pipeline_table(pipeline_rows)}
"""
    update_section(SECTION, section)
    RESULTS_JSON.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {"rows": []}
    kept = [r for r in previous["rows"] if r.get("what") == "score"]
    previous.update(
        command=command,
        settings=settings,
        machine=machine,
        matmul_peak=peak,
        rows=rows + parts + [stall] + pipeline_rows + kept,
    )
    RESULTS_JSON.write_text(json.dumps(previous, indent=2) + "\n")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per round per side")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="alternating rounds")
    parser.add_argument("--pipeline_batches", type=int, default=300, help="batches per round")
    parser.add_argument("--part_steps", type=int, default=1, help="paper-scale parts: steps/round")
    parser.add_argument("--model", default="base", help="packaged I2CE model to score with")
    parser.add_argument("--only", choices=("all", "train", "score"), default="all")
    parser.add_argument("--golden", type=Path, default=GOLDEN_FILE, help="scoring candidates")
    args = parser.parse_args()
    command = ("python bench/throughput.py " + " ".join(sys.argv[1:])).strip()
    if args.only != "train":
        if not args.golden.is_file():
            parser.error(
                f"{args.golden} does not exist (pycocoevalcap golden rows: see shared/data)"
            )
        gts, res = load_golden_pairs(args.golden, limit=None)
        rows = measure_scoring(
            gts, res, rounds=args.rounds, scorer=I2CEScorer.pretrained(args.model)
        )
        print(write_scoring_results(command, rows, args.model), flush=True)
    if args.only == "score":
        return
    torch.set_num_threads(os.cpu_count())
    machine = machine_facts()
    sizes = Sizes(batch_size=args.batch_size)
    before = flops.measured_matmul_peak(MATMUL_SIZE, repeats=10)
    rows = []
    for name in TRAINING_MODELS:
        row = measure_training(
            name, steps=args.steps, warmup=args.warmup, sizes=sizes, rounds=args.rounds
        )
        print(
            f"{name}: ratio {row['ratio_median']:.2f} ({row['ratio_min']:.2f}-"
            f"{row['ratio_max']:.2f}), {row['flops_per_s'] / 1e9:.1f} GFLOP/s; load "
            f"{row['load_start']:.2f}/{row['load_end']:.2f}",
            flush=True,
        )
        rows.append(row)
    parts = measure_i2ce_parts(steps=args.part_steps, rounds=args.rounds, sizes=sizes)
    stall = measure_checkpoint_stall(rounds=args.rounds, sizes=sizes)
    after = flops.measured_matmul_peak(MATMUL_SIZE, repeats=10)
    peak = {"before": before, "after": after, "flops_per_s": max(before, after)}
    for row in rows + parts:
        row["peak_fraction"] = row["flops_per_s"] / peak["flops_per_s"]
    for row in parts:
        row["torch_peak_fraction"] = row["torch_flops_per_s"] / peak["flops_per_s"]
    fastest = max(row["ours"] for row in rows)
    pipeline_rows = measure_pipeline(
        batch_size=args.batch_size, batches=args.pipeline_batches, rounds=args.rounds
    )
    for row in pipeline_rows:
        row["headroom"] = row["ours"] / fastest
        print(f"{row['name']}: {row['ours']:.0f} ex/s, {row['headroom']:.1f}x the fastest step")
    settings = {
        k: v
        for k, v in vars(args).items()
        if k in ("steps", "warmup", "batch_size", "rounds", "pipeline_batches", "part_steps")
    }
    print(
        write_training_results(command, settings, machine, peak, rows, parts, stall, pipeline_rows)
    )


if __name__ == "__main__":
    main()
