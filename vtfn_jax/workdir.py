"""What a VTFN training workdir holds beside its weights: the run's data, rebuilt or saved.

Written by vtfn_jax.train, read by SentenceEncoder.from_checkpoint and
vtfn_jax.evaluate, which load the weights through vtfn_jax.kinds: apart from the
trainer, so that loading a model never imports training.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import ml_collections
import numpy as np

from capsim.data.corpus import CaptionSplit, encode_corpus
from capsim.text import Vocab
from capsim.workdir import DATA_FILE, VOCAB_FILE
from vtfn_jax.data import VtfnData, prepare_data

logger = logging.getLogger(__name__)


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
