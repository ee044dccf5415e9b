"""What a VTFN training workdir holds, and how each model kind is loaded back from it.

Written by vtfn_jax.train, read by SentenceEncoder.from_checkpoint and
vtfn_jax.evaluate: apart from the trainer, so that loading a model never
imports training (vtfn_jax.train builds its evaluation subjects from
SentenceEncoder, which loads through here).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import jax.numpy as jnp
import ml_collections
import numpy as np

from capsim.checkpoints import restore_model
from capsim.data import glove
from capsim.data.corpus import CaptionSplit, encode_corpus
from capsim.text import Vocab
from capsim.workdir import DATA_FILE, VOCAB_FILE
from vtfn_jax import baselines
from vtfn_jax.data import VtfnData, prepare_data
from vtfn_jax.embedders import TokenEmbedder
from vtfn_jax.model import VTFN, build_model

logger = logging.getLogger(__name__)


def _embed_text(model: VTFN, ids, mask):
    return model.embed_text(ids, mask)


def text_embedder(model: VTFN, vocab: Vocab) -> TokenEmbedder:
    return TokenEmbedder(model, vocab, _embed_text)


def image_embedder(model: VTFN) -> Callable[[np.ndarray], np.ndarray]:
    return lambda features: np.asarray(model.embed_image(jnp.asarray(features)))


def model_for(config: ml_collections.ConfigDict, data: VtfnData) -> VTFN:
    """The VTFN model of ``config``, word vectors from ``model.glove`` when it names some."""
    init = glove.vectors_for_vocab(
        config.model.glove, data.vocab, config.model.embed_dim, seed=config.seed
    )
    return build_model(config, len(data.vocab), data.image_dim, init)


def load_vtfn(config: ml_collections.ConfigDict, workdir: Path, data: VtfnData):
    model = model_for(config, data)
    restore_model(workdir, model)
    return text_embedder(model, data.vocab), image_embedder(model)


LOADERS = {"vtfn": load_vtfn, **{kind: load for kind, (_, load) in baselines.KINDS.items()}}


def load_kind(config: ml_collections.ConfigDict, workdir: Path, data: VtfnData):
    """(embedder, image embedder or None) of the trained kind in ``workdir``."""
    if config.model.kind not in LOADERS:
        raise KeyError(f"unknown model.kind {config.model.kind!r}; known: {sorted(LOADERS)}")
    return LOADERS[config.model.kind](config, workdir, data)


def run_data(config: ml_collections.ConfigDict, workdir: str | Path) -> VtfnData:
    """The run's data rebuilt from its config, checked against the vocabulary it trained with."""
    workdir = Path(workdir)
    data = prepare_data(config)
    saved = Vocab.load(workdir / VOCAB_FILE)
    if saved.itos != data.vocab.itos:
        raise ValueError(f"{workdir / VOCAB_FILE} does not match the vocabulary its config builds")
    return data


def saved_data(config: ml_collections.ConfigDict, workdir: str | Path) -> VtfnData:
    """The run's vocabulary and image-feature size, without captions or features: what a
    kind's load function needs. A workdir from before ``data.json`` rebuilds its data."""
    workdir = Path(workdir)
    if not (workdir / DATA_FILE).is_file():
        logger.info("%s has no %s: rebuilding the run's data", workdir, DATA_FILE)
        return run_data(config, workdir)
    vocab = Vocab.load(workdir / VOCAB_FILE)
    saved = json.loads((workdir / DATA_FILE).read_text())
    features = np.zeros((0, saved["image_dim"]), np.float32)
    train = CaptionSplit(encode_corpus([], vocab, config.data.max_len), features)
    return VtfnData(vocab, {"train": train}, saved["feature_source"], {})
