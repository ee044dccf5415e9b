"""The one catalogue of training cases the benches time: models, sizes, batches, FLOP counts.

Two families, both built here so that a model's sizes are written once:

- ``CASES``: one model at one batch size and compute dtype (I2CE at the paper's scale,
  VTFN-GRU, VTFN-BOW), at ``PAPER`` or ``TOY`` sizes: the accelerator check's rows and
  bench/speed/step_levers.py's.
- ``TRAINING_MODELS``: each model's real training config (the coco configs, I2CE also at
  the paper's scale, the recurrent ones again on length-bucketed batches), the rows of
  bench/throughput.py against their PyTorch twins.

Both feed the step synthetic batches shaped as the input pipeline yields them
(``caption_batches``) and count its FLOPs by hand (bench/cases/flops.py). Nothing here
imports torch: the accelerator check runs without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import ml_collections
import numpy as np
from flax import nnx

from bench.cases import flops
from capsim import text
from capsim.data import pipeline
from configs import coco_bow, coco_cnn, coco_gru, coco_lstm, i2ce_coco_margin
from i2ce_jax import model as i2ce_model
from vtfn_jax import model as vtfn_model

HostBatch = dict[str, np.ndarray]
IMAGE_DIM = 2048  # InceptionV3's features
DISTINCT_BATCHES = 4


@dataclasses.dataclass(frozen=True)
class CaseSizes:
    """Model and caption sizes of ``CASES``: the paper's (``PAPER``) or tiny ones (``TOY``)."""

    tokens: int
    embed: int
    hidden: int
    vocab: int
    vtfn_dim: int
    vtfn_tokens: int
    image_dim: int


PAPER = CaseSizes(
    tokens=20,
    embed=300,
    hidden=512,
    vocab=10_000,
    vtfn_dim=128,
    vtfn_tokens=24,
    image_dim=IMAGE_DIM,
)
TOY = CaseSizes(tokens=8, embed=32, hidden=64, vocab=500, vtfn_dim=32, vtfn_tokens=8, image_dim=64)


def i2ce_config(sizes: CaseSizes, batch: int = 128) -> ml_collections.ConfigDict:
    """The paper's dual (margin) branch at ``sizes``: captions padded to ``sizes.tokens``."""
    config = i2ce_coco_margin.get_config(f"embed={sizes.embed},hidden={sizes.hidden},batch={batch}")
    config.data.max_len = sizes.tokens
    return config


def caption_batches(
    rng: np.random.Generator,
    *,
    count: int,
    batch: int,
    max_len: int,
    vocab: int,
    lengths: tuple[int, int],
    length_multiple: int = 0,
    image_dim: int | None = None,
) -> list[HostBatch]:
    """``count`` host batches of random captions (``<S> ... </S>``, ``lengths`` tokens, both
    ends included), padded to ``max_len`` or, with ``length_multiple``, cut into the widths
    that capsim.data.pipeline.LengthBuckets forms. With ``image_dim`` a VTFN batch (one
    caption per image, as in the paper), else an I2CE one (about two captions per image)."""
    all_lengths = rng.integers(lengths[0], lengths[1] + 1, count * batch)
    widths = np.full(count, max_len)
    if length_multiple:
        buckets = pipeline.LengthBuckets(all_lengths, length_multiple, max_len)
        order = buckets.group(np.arange(len(all_lengths)), batch, rng)
        all_lengths = all_lengths[order]
        widths = buckets.rounded(order).reshape(count, batch).max(axis=1)
    batches = []
    for row_lengths, width in zip(all_lengths.reshape(count, batch), widths, strict=True):
        mask = np.arange(width)[None, :] < row_lengths[:, None]
        words = rng.integers(len(text.SPECIALS), vocab, (batch, width))
        ids = np.where(mask, words, text.PAD_ID).astype(np.int32)
        ids[:, 0] = text.BOS_ID
        ids[np.arange(batch), row_lengths - 1] = text.EOS_ID
        if image_dim:
            features = rng.standard_normal((batch, image_dim), np.float32)
            group = np.arange(batch, dtype=np.int32)
            batches.append({"ids": ids, "mask": mask, "features": features, "group": group})
        else:
            group = rng.integers(0, max(batch // 2, 1), batch).astype(np.int32)
            batches.append({"anchor_ids": ids, "anchor_mask": mask, "group": group})
    return batches


# --------------------------------------------------------------------------- CASES
@dataclasses.dataclass
class TrainingCase:
    """A model, its loss, host batches and its hand FLOP count, ready to time."""

    config: ml_collections.ConfigDict
    model: nnx.Module
    loss_fn: Callable
    batches: list[HostBatch]
    step_flops: flops.StepFlops
    sizes: str
    vocab_size: int
    image_dim: int | None = None  # VTFN's image features; None for I2CE


def _case_batches(sizes: CaseSizes, batch: int, tokens: int, image_dim: int | None = None):
    """The cases' batches: captions of half the padded length to all of it."""
    return caption_batches(
        np.random.default_rng(0),
        count=DISTINCT_BATCHES,
        batch=batch,
        max_len=tokens,
        vocab=sizes.vocab,
        lengths=(max(2, tokens // 2), tokens),
        image_dim=image_dim,
    )


def i2ce_case(sizes: CaseSizes, dtype: str, batch: int) -> TrainingCase:
    """The paper's dual (margin) branch at ``sizes``."""
    config = i2ce_config(sizes, batch)
    config.model.dtype = dtype
    return TrainingCase(
        config,
        i2ce_model.build_model(config, sizes.vocab),
        i2ce_model.make_loss_fn(config),
        _case_batches(sizes, batch, sizes.tokens),
        flops.i2ce_step_flops(config, sizes.vocab),
        f"batch {batch}, {sizes.tokens} tokens, embed {sizes.embed}, hidden "
        f"{sizes.hidden}, vocabulary {sizes.vocab}, margin branch",
        sizes.vocab,
    )


def vtfn_case(
    config: ml_collections.ConfigDict, sizes: CaseSizes, dtype: str, batch: int
) -> TrainingCase:
    """VTFN with ``config``'s text tower and the Pearson loss, one caption per image."""
    config.batch_size = batch
    config.data.max_len = sizes.vtfn_tokens
    config.model.dtype = dtype
    return TrainingCase(
        config,
        vtfn_model.build_model(config, sizes.vocab, sizes.image_dim),
        vtfn_model.make_loss_fn(config),
        _case_batches(sizes, batch, sizes.vtfn_tokens, sizes.image_dim),
        flops.vtfn_step_flops(config, sizes.image_dim),
        f"batch {batch}, {sizes.vtfn_tokens} tokens, N = {sizes.vtfn_dim}, "
        f"vocabulary {sizes.vocab}, {sizes.image_dim}-d features, Pearson loss",
        sizes.vocab,
        sizes.image_dim,
    )


# Row name -> the case at (sizes, dtype, batch). The batch sweep runs SWEPT; the twins run all.
CASES: dict[str, Callable[[CaseSizes, str, int], TrainingCase]] = {
    "I2CE-paper-scale": i2ce_case,
    "VTFN-GRU": lambda s, d, b: vtfn_case(coco_gru.get_config(f"dim={s.vtfn_dim}"), s, d, b),
    "VTFN-BOW": lambda s, d, b: vtfn_case(coco_bow.get_config(f"dim={s.vtfn_dim}"), s, d, b),
}
SWEPT = ("I2CE-paper-scale", "VTFN-GRU")


# --------------------------------------------------------------------------- TRAINING_MODELS
VOCAB_SIZE = 5000
# Caption lengths in tokens, <S> and </S> included; batches pad to the config's data.max_len.
MIN_TOKENS, MAX_TOKENS = 8, 20
# Length-bucketed rows: widths rounded up to this multiple, over 8 batches, so the mix of
# widths is close to an epoch's (with 8-20 tokens: 3 batches of 12, 2 of 16, 3 of 20).
LENGTH_MULTIPLE, BUCKETED_BATCHES = 4, 8


def _length_bucketed(make_config: Callable[[], ml_collections.ConfigDict]):
    """The same model trained on length-bucketed batches (data.length_buckets=4)."""

    def config() -> ml_collections.ConfigDict:
        config = make_config()
        config.data.length_buckets = LENGTH_MULTIPLE
        return config

    return config


# name -> the model's real training config.
TRAINING_MODELS: dict[str, Callable[[], ml_collections.ConfigDict]] = {
    "I2CE-paper-scale": lambda: i2ce_config(PAPER),
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
# Rows whose vocabulary is not VOCAB_SIZE: the paper's and the default config's cap.
ROW_VOCAB = {"I2CE-paper-scale": PAPER.vocab, "I2CE-default": 6000, "I2CE-default-bucketed": 6000}
# Rows whose captions all fill max_len (the paper-scale shape the FLOPs are counted for).
FULL_LENGTH = {"I2CE-paper-scale"}


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Batch and model sizes of ``TRAINING_MODELS``' rows; ``width`` shrinks every
    embedding/hidden size and ``vocab_size`` overrides each row's own vocabulary (tests)."""

    batch_size: int = 128
    vocab_size: int | None = None
    image_dim: int = IMAGE_DIM
    width: int | None = None

    def vocab_for(self, name: str) -> int:
        return self.vocab_size or ROW_VOCAB.get(name, VOCAB_SIZE)


DEFAULT_SIZES = Sizes()


def is_vtfn(name: str) -> bool:
    return name.startswith("VTFN")


def narrowed(config: ml_collections.ConfigDict, width: int | None) -> ml_collections.ConfigDict:
    """``config`` with every embedding/hidden size set to ``width`` (tests' tiny models)."""
    if width:
        for key in ("dim", "embed_dim", "hidden_dim"):
            if key in config.model:
                config.model[key] = width
    return config


def model_config(name: str, sizes: Sizes) -> ml_collections.ConfigDict:
    config = narrowed(TRAINING_MODELS[name](), sizes.width)
    config.batch_size = sizes.batch_size
    return config


def synthetic_batches(
    name: str, config: ml_collections.ConfigDict, sizes: Sizes, seed: int = 0
) -> list[HostBatch]:
    """A few host batches shaped as the model's input pipeline yields them."""
    max_len = config.data.max_len
    multiple = config.data.get("length_buckets", 0)
    return caption_batches(
        np.random.default_rng(seed),
        count=BUCKETED_BATCHES if multiple else DISTINCT_BATCHES,
        batch=sizes.batch_size,
        max_len=max_len,
        vocab=sizes.vocab_for(name),
        lengths=(max_len if name in FULL_LENGTH else MIN_TOKENS, min(MAX_TOKENS, max_len)),
        length_multiple=multiple,
        image_dim=sizes.image_dim if is_vtfn(name) else None,
    )


def step_flops(
    name: str, config: ml_collections.ConfigDict, sizes: Sizes, batches: Sequence[HostBatch]
) -> float:
    """Hand-counted model FLOPs of one training step (bench/cases/flops.py) at the width the
    batches are padded to; the mean over ``batches`` when length buckets give several widths."""
    counts = []
    for batch in batches:
        at_width = config.copy_and_resolve_references()
        at_width.data.max_len = batch["mask" if is_vtfn(name) else "anchor_mask"].shape[1]
        if is_vtfn(name):
            counts.append(flops.vtfn_step_flops(at_width, sizes.image_dim).training)
        else:
            counts.append(flops.i2ce_step_flops(at_width, sizes.vocab_for(name)).training)
    return float(np.mean(counts))
