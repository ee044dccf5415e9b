"""The I2CE encoders shipped in the package: load and export.

``load(name)`` returns a packaged encoder (word vectors + GRU; the decoder is
only needed for training and is not shipped), its vocabulary and its metadata;
``I2CEScorer.pretrained(name)`` wraps it. Nothing is downloaded. Models:
``base`` (the default) and ``large``, trained on redistributable text, and
``research``, trained on Flickr text too (non-commercial terms; only by name),
one folder each beside this file.

Rebuild one (i2ce_jax/rebuild_pretrained.py, beside the trainer so that loading a model
never imports it: trains the recipe in recipe.py, then exports into the package):

    python -m i2ce_jax.rebuild_pretrained --name base --data_dir ../shared/data --into_package

``--export_only`` exports an already trained ``--workdir``. MODEL_CARD.md beside
this file records the data, the licences, the figures and the checksums of the
``encoder.npz`` files.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import nnx, traverse_util

from capsim import text
from capsim.checkpoints import restore_model
from capsim.encoders import RNNEncoder
from capsim.errors import CheckpointError
from capsim.workdir import RESULTS_FILE, load_config

PACKAGE_DIR = Path(__file__).resolve().parent
NAMES = ("base", "large", "research")
# Models trained on text under non-commercial terms: loaded only when named.
RESEARCH_ONLY = {"research": "Flickr8k/Flickr30k captions: non-commercial research use only"}
DEFAULT = "base"
WEIGHTS_FILE = "encoder.npz"
VOCAB_FILE = "vocab.json"
META_FILE = "encoder.json"
FORMAT = "i2ce.pretrained/1"


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _encoder(vocab_size: int, meta: dict[str, Any]) -> RNNEncoder:
    """The packaged encoder's shapes; fields a model exported before them lack get their defaults."""
    return RNNEncoder(
        vocab_size,
        meta["embed_dim"],
        meta["hidden_dim"],
        cell="gru",
        rngs=nnx.Rngs(0),
        pooling=meta.get("state_pooling", "last"),
        bidirectional=meta.get("bidirectional", False),
    )


def export(workdir: str | Path, out_dir: str | Path) -> dict[str, Any]:
    """Writes the best (else latest) encoder of an I2CE workdir as a packaged model."""
    from i2ce_jax.model import build_model

    workdir = Path(workdir)
    config = load_config(workdir)
    vocab = text.Vocab.load(workdir / VOCAB_FILE)
    model = build_model(config, len(vocab))
    restore_model(workdir, model)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    params = traverse_util.flatten_dict(
        nnx.to_pure_dict(nnx.state(model.encoder, nnx.Param)), sep="/"
    )
    np.savez(out_dir / WEIGHTS_FILE, **{k: np.asarray(v) for k, v in params.items()})
    vocab.save(out_dir / VOCAB_FILE)
    results_file = workdir / RESULTS_FILE
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    config_record = config.to_dict()
    config_record["data"]["data_dir"] = "<data_dir>"  # where it was trained says nothing here
    meta = {
        "format": FORMAT,
        "vocab_size": len(vocab),
        "embed_dim": config.model.embed_dim,
        "hidden_dim": config.model.hidden_dim,
        "state_pooling": config.model.get("state_pooling", "last"),
        "bidirectional": config.model.get("bidirectional", False),
        "pooling": config.scorer.pooling,
        "loss": config.loss.name,
        "steps": results.get("steps"),
        "dev_same_image_auc": results.get("best_dev_same_image_auc"),
        "config": config_record,
    }
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return {"sha256": sha256(out_dir / WEIGHTS_FILE), **meta}


def load(name: str | Path = DEFAULT) -> tuple[RNNEncoder, text.Vocab, dict[str, Any]]:
    """A packaged encoder (eval mode), its vocabulary and its metadata.

    ``name`` is one of NAMES or the folder of any exported model.
    """
    model_dir = PACKAGE_DIR / name if name in NAMES else Path(name)
    for needed in (WEIGHTS_FILE, VOCAB_FILE, META_FILE):
        if not (model_dir / needed).exists():
            raise CheckpointError(f"{model_dir} has no {needed}: not an exported I2CE model")
    meta = json.loads((model_dir / META_FILE).read_text())
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{model_dir / META_FILE}: not a {FORMAT} file")
    vocab = text.Vocab.load(model_dir / VOCAB_FILE)
    # Shapes only: the weights come from the file, so nothing is initialised randomly.
    encoder = nnx.eval_shape(lambda: _encoder(len(vocab), meta))
    state = nnx.state(encoder, nnx.Param)
    expected = {
        k: v.shape for k, v in traverse_util.flatten_dict(nnx.to_pure_dict(state), sep="/").items()
    }
    try:
        with np.load(model_dir / WEIGHTS_FILE) as file:
            weights = {k: jnp.asarray(file[k]) for k in file.files}
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise CheckpointError(f"{model_dir / WEIGHTS_FILE} is unreadable: {error}") from error
    found = {k: v.shape for k, v in weights.items()}
    if found != expected:
        raise CheckpointError(
            f"{model_dir / WEIGHTS_FILE} does not match {META_FILE}: arrays {found}, "
            f"expected {expected}"
        )
    nnx.replace_by_pure_dict(state, traverse_util.unflatten_dict(weights, sep="/"))
    nnx.update(encoder, state)
    # Concrete (unused) dropout keys too: a state with abstract leaves would make every
    # jit call of the encoder take JAX's slow dispatch path (1 ms a batch).
    nnx.reseed(encoder, default=0)
    encoder.eval()
    return encoder, vocab, meta
