"""The I2CE models judged on held-out (dev) captions, shared by the quality benches that
choose among them (i2ce_dev_retrieval.py, i2ce_ensembles.py, i2ce_retrain.py): the dev
splits, the models named on the command line, nearest-caption retrieval, the rows recorded.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path

import ml_collections
import numpy as np

from bench.harness import record_results
from capsim.config_lib import DATA_SEED
from capsim.data import corpus as corpus_lib
from capsim.eval.retrieval import retrieval_metrics
from capsim.tables import format_table
from i2ce_jax import pretrained
from i2ce_jax.scorer import I2CEScorer

DEV_SETS = ("coco", "flickr")
NO_CAPTION = -2.0  # below any cosine: the score of an image whose only caption is the query


def dev_splits(data_dir: Path, seed: int = DATA_SEED, dev_images: int = 500) -> dict[str, list]:
    """The dev captions of the I2CE ``sources`` runs (the same for any mixture and training
    seed; ``seed`` is their ``data.seed``)."""
    data = ml_collections.ConfigDict(
        dict(
            data_dir=str(data_dir),
            sources=("coco",),
            dev_sets=DEV_SETS,
            dev_images=dev_images,
            seed=seed,
        )
    )
    return corpus_lib.load_sources(data)[1]


def nearest_caption_retrieval(vectors: np.ndarray, image_index: np.ndarray) -> dict[str, float]:
    """Each caption ranks the images by their nearest other caption (cosine of unit vectors)."""
    sim = vectors @ vectors.T
    np.fill_diagonal(sim, NO_CAPTION)
    order = np.argsort(image_index, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(image_index[order]) != 0])
    by_image = np.maximum.reduceat(sim[:, order], starts, axis=1)
    metrics = retrieval_metrics(by_image, np.unique(image_index, return_inverse=True)[1])
    return {"mrr": metrics["c2i_mrr"], "r1": metrics["c2i_r1"]}


def evaluate(scorer: I2CEScorer, splits: dict[str, list]) -> dict[str, float]:
    row = {}
    for name, records in splits.items():
        vectors = scorer.embed([r.text for r in records], ids=[r.caption_id for r in records])
        images = np.unique([r.image_id for r in records], return_inverse=True)[1]
        for key, value in nearest_caption_retrieval(vectors, images).items():
            row[f"{name}_{key}"] = value
    for key in ("mrr", "r1"):
        row[f"mean_{key}"] = float(np.mean([row[f"{name}_{key}"] for name in splits]))
    return row


def load_scorer(path: Path) -> I2CEScorer:
    """The scorer of an exported model folder, or of a workdir's best checkpoint."""
    if (path / pretrained.WEIGHTS_FILE).exists():
        return I2CEScorer.pretrained(path)
    return I2CEScorer.from_checkpoint(path)


def model_parser(description: str) -> argparse.ArgumentParser:
    """The arguments of the I2CE model benches: data, the models (``--run``, ``--pretrained``), tag."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data_dir", default="../shared/data", type=Path)
    parser.add_argument(
        "--run", action="append", default=[], metavar="NAME=DIR", help="a workdir or model folder"
    )
    parser.add_argument("--pretrained", default="", help="packaged models, comma-separated")
    parser.add_argument("--tag", default="", help="own JSON file and RESULTS.md section")
    return parser


def model_loaders(args: argparse.Namespace, pretrained_prefix: str = "") -> dict:
    """Name -> a function that loads that model's scorer, ``--run`` models first."""
    loaders = {
        name: (lambda p=Path(path): load_scorer(p))
        for name, path in (spec.split("=", 1) for spec in args.run)
    }
    for model in filter(None, args.pretrained.split(",")):
        loaders[pretrained_prefix + model] = lambda m=model: I2CEScorer.pretrained(m)
    return loaders


def model_table(rows: Mapping[str, Mapping], columns: Sequence[str], first: str = "model") -> str:
    """One line per model (or ensemble, ``first="models"``) of ``rows``, in ``columns``."""
    return format_table([{first: name, **row} for name, row in rows.items()], [first, *columns])


def record_dev_rows(
    script: str, section: str, splits: Mapping, rows: Mapping, text: str, tag: str
) -> None:
    """``rows`` per model, measured on the dev ``splits``, as JSON and a RESULTS.md section
    (the split sizes, then ``text``: what the columns are, and the table)."""
    counts = {name: len(records) for name, records in splits.items()}
    record_results(
        script,
        {"captions": counts, "rows": rows},
        section,
        f"Held-out captions {counts}{text}",
        tag,
    )
