"""The I2CE encoder shipped in the package, and the command that rebuilds it.

``load()`` returns the packaged encoder (word vectors + GRU; the decoder is only
needed for training and is not shipped), its vocabulary and its metadata;
``I2CEScorer.pretrained()`` wraps it. Nothing is downloaded.

Rebuild (trains configs/i2ce_pretrained.py on COCO captions, then exports):

    python -m i2ce_jax.pretrained --data_dir ../shared/data --workdir /tmp/i2ce_pretrained \
        --out i2ce_jax/pretrained

``--export_only`` exports an already trained workdir. MODEL_CARD.md beside this
file records the data, the licences, the figures and the checksum of
``encoder.npz``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from flax import nnx

from capsim import text
from capsim.encoders import RNNEncoder
from capsim.errors import CheckpointError
from capsim.train.checkpoint import Checkpointer, find_model_checkpoint
from capsim.train.writers import load_config

PACKAGE_DIR = Path(__file__).resolve().parent
WEIGHTS_FILE = "encoder.npz"
VOCAB_FILE = "vocab.json"
META_FILE = "encoder.json"
FORMAT = "i2ce.pretrained/1"


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _encoder(vocab_size: int, embed_dim: int, hidden_dim: int) -> RNNEncoder:
    return RNNEncoder(vocab_size, embed_dim, hidden_dim, cell="gru", rngs=nnx.Rngs(0))


def _flatten(tree: dict, prefix: str = "") -> dict[str, np.ndarray]:
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}/"))
        else:
            flat[name] = np.asarray(value)
    return flat


def _unflatten(flat: dict[str, np.ndarray]) -> dict:
    tree: dict = {}
    for name, value in flat.items():
        *parents, leaf = name.split("/")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return tree


def export(workdir: str | Path, out_dir: str | Path) -> dict[str, Any]:
    """Writes the best (else latest) encoder of an I2CE workdir as a packaged model."""
    from i2ce_jax.model import build_model

    manager_dir = find_model_checkpoint(workdir)
    workdir = Path(workdir)
    config = load_config(workdir)
    vocab = text.Vocab.load(workdir / VOCAB_FILE)
    model = build_model(config, len(vocab))
    manager = Checkpointer(manager_dir, read_only=True)
    manager.restore(model=model)
    manager.close()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    params = _flatten(nnx.to_pure_dict(nnx.state(model.encoder, nnx.Param)))
    np.savez(out_dir / WEIGHTS_FILE, **params)
    vocab.save(out_dir / VOCAB_FILE)
    results_file = workdir / "results.json"
    results = json.loads(results_file.read_text()) if results_file.exists() else {}
    meta = {
        "format": FORMAT,
        "vocab_size": len(vocab),
        "embed_dim": config.model.embed_dim,
        "hidden_dim": config.model.hidden_dim,
        "pooling": config.scorer.pooling,
        "loss": config.loss.name,
        "steps": results.get("steps"),
        "dev_same_image_auc": results.get("best_dev_same_image_auc"),
        "config": config.to_dict(),
    }
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return {"sha256": sha256(out_dir / WEIGHTS_FILE), **meta}


def load(model_dir: str | Path = PACKAGE_DIR) -> tuple[RNNEncoder, text.Vocab, dict[str, Any]]:
    """The packaged encoder (eval mode), its vocabulary and its metadata."""
    model_dir = Path(model_dir)
    for needed in (WEIGHTS_FILE, VOCAB_FILE, META_FILE):
        if not (model_dir / needed).exists():
            raise CheckpointError(f"{model_dir} has no {needed}: not an exported I2CE model")
    meta = json.loads((model_dir / META_FILE).read_text())
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{model_dir / META_FILE}: not a {FORMAT} file")
    vocab = text.Vocab.load(model_dir / VOCAB_FILE)
    encoder = _encoder(len(vocab), meta["embed_dim"], meta["hidden_dim"])
    state = nnx.state(encoder, nnx.Param)
    try:
        with np.load(model_dir / WEIGHTS_FILE) as weights:
            nnx.replace_by_pure_dict(state, _unflatten(dict(weights)))
    except (OSError, ValueError, KeyError) as error:
        raise CheckpointError(f"{model_dir / WEIGHTS_FILE} is unreadable: {error}") from error
    nnx.update(encoder, state)
    encoder.eval()
    return encoder, vocab, meta


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Train and export the packaged I2CE model.")
    parser.add_argument("--data_dir", default="../shared/data")
    parser.add_argument("--workdir", default="/tmp/i2ce_pretrained")
    parser.add_argument("--out", default=str(PACKAGE_DIR))
    parser.add_argument("--config_arg", default="", help="extra configs/i2ce_pretrained.py arguments")
    parser.add_argument("--export_only", action="store_true", help="export --workdir as it is")
    args = parser.parse_args(argv)
    if not args.export_only:
        from configs import i2ce_pretrained
        from i2ce_jax.train import train_and_evaluate

        arg = ",".join(filter(None, [f"data_dir={args.data_dir}", args.config_arg]))
        start = time.perf_counter()
        summary = train_and_evaluate(i2ce_pretrained.get_config(arg), args.workdir)
        print(f"trained in {time.perf_counter() - start:.0f} s: {json.dumps(summary)}")
    info = export(args.workdir, args.out)
    size = (Path(args.out) / WEIGHTS_FILE).stat().st_size
    print(f"exported {args.out}/{WEIGHTS_FILE}: {size / 1e6:.1f} MB, sha256 {info['sha256']}")
