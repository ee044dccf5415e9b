"""Ensembles of I2CE encoders: does averaging the members' cosines beat the best member?

    python bench/quality/i2ce_ensembles.py --data_dir ../shared/data --run NAME=DIR ... \
        [--pretrained base,large,research] [--size 2] [--tag levers]

``DIR`` is a training workdir (its best checkpoint) or an exported model folder.

An ensemble's sentence vector concatenates its members' unit vectors scaled by
1/sqrt(k), so the cosine of two captions is the mean of the k members' cosines,
and top-3 pooling then runs as for one model. Its encoder cost is the sum of its
members'. Every model alone and every ensemble of 2..``--size`` members is
measured on the held-out dev captions that early stopping watched (the mean of
the per-split same-image AUCs, computed as training does, and the
nearest-caption retrieval MRR of bench/quality/i2ce_dev_retrieval.py) and then on
Flickr8k-Expert (Kendall τc × 100, CLIPScore protocol). Choose on the dev
columns only. Writes bench/results/i2ce_ensembles[_TAG].json and a RESULTS.md
section.
"""

from __future__ import annotations

import itertools
import json
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from bench.harness import record_results
from bench.quality.dev_captions import (
    dev_splits,
    model_loaders,
    model_parser,
    model_table,
    nearest_caption_retrieval,
)
from capsim.eval import judgment_harness
from capsim.eval.judgment_sets import load_set
from capsim.eval.same_diff import evaluate_same_diff, make_same_diff_pairs
from capsim.metrics.pooling import pool_similarities
from i2ce_jax.scorer import I2CEScorer

DEV_PAIRS = 1000  # same-image and different-image pairs per dev split, as training's dev eval


def ensemble_vectors(members: list[np.ndarray]) -> np.ndarray:
    """[N, sum H]: the members' unit vectors side by side, over sqrt(k) (cosine = mean cosine)."""
    return np.concatenate(members, axis=1) / np.sqrt(len(members))


def captions_by_image(records: list) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for record in records:
        grouped.setdefault(record.image_id, []).append(record.text)
    return grouped


class Measures:
    """The dev captions and the Flickr8k-Expert pairs, each model's vectors of them, and
    the ensemble measures computed from those vectors."""

    def __init__(self, data_dir: Path):
        self.splits = dev_splits(data_dir)
        self.dev_pairs = {
            name: make_same_diff_pairs(captions_by_image(records), DEV_PAIRS, seed=0)
            for name, records in self.splits.items()
        }
        judgments = load_set("flickr8k_expert", data_dir / "flickr8k")
        self.expert = judgment_harness.group_judgments(judgments)
        sentences = {c for cs in self.expert.res.values() for c in cs}
        sentences |= {r for rs in self.expert.gts.values() for r in rs}
        self.expert_sentences = sorted(sentences)
        self.vectors: dict[str, dict[str, np.ndarray]] = {}

    def embed(self, name: str, scorer: I2CEScorer) -> None:
        """Unit vectors of every dev caption (per split) and every Expert sentence."""
        self.vectors[name] = {
            split: scorer.embed([r.text for r in records], ids=[r.caption_id for r in records])
            for split, records in self.splits.items()
        }
        self.vectors[name]["expert"] = scorer.embed(self.expert_sentences)

    def row(self, names: tuple[str, ...]) -> dict[str, float]:
        vectors = {
            part: ensemble_vectors([self.vectors[n][part] for n in names])
            for part in self.vectors[names[0]]
        }
        row = {}
        for split, records in self.splits.items():
            lookup = dict(zip((r.text for r in records), vectors[split], strict=True))
            same_diff = evaluate_same_diff(
                lambda texts, lookup=lookup: np.stack([lookup[t] for t in texts]),
                self.dev_pairs[split],
            )
            row[f"{split}_auc"] = same_diff["auc"]
            images = np.unique([r.image_id for r in records], return_inverse=True)[1]
            row[f"{split}_mrr"] = nearest_caption_retrieval(vectors[split], images)["mrr"]
        for key in ("auc", "mrr"):
            row[f"dev_{key}"] = float(np.mean([row[f"{s}_{key}"] for s in self.splits]))
        row["expert_tau_c"] = self.expert_tau_c(vectors["expert"])
        return row

    def expert_tau_c(self, vectors: np.ndarray) -> float:
        """Top-3 pooled cosine of each Expert candidate with its references, τc × 100."""
        index = {s: i for i, s in enumerate(self.expert_sentences)}
        pairs = self.expert
        width = max(len(pairs.gts[k]) for k in pairs.keys)
        refs = np.full((len(pairs.keys), width), -1)
        for i, key in enumerate(pairs.keys):
            refs[i, : len(pairs.gts[key])] = [index[r] for r in pairs.gts[key]]
        candidates = vectors[[index[pairs.res[k][0]] for k in pairs.keys]]
        sims = np.einsum("nd,nrd->nr", candidates, vectors[np.maximum(refs, 0)])
        scores = pool_similarities(np.where(refs >= 0, sims, 0.0), refs >= 0, "top-3")
        return judgment_harness.tau_c_table(pairs, {"ensemble": scores})["ensemble"]


def main() -> None:
    parser = model_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=2, help="the most members of an ensemble")
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.WARNING)
    loaders = model_loaders(args)
    if not loaders:
        parser.error("name at least one model with --run or --pretrained")
    measures = Measures(args.data_dir.resolve())
    for name, load in loaders.items():
        measures.embed(name, load())
        print(f"embedded {name}", flush=True)
    rows = {}
    for size in range(1, min(args.size, len(loaders)) + 1):
        for names in itertools.combinations(loaders, size):
            rows["+".join(names)] = {"members": size, **measures.row(names)}
            print(f"{'+'.join(names)}: {json.dumps(rows['+'.join(names)])}", flush=True)

    columns = ["members", "dev_auc", "dev_mrr", *(f"{s}_auc" for s in measures.splits)]
    columns += ["expert_tau_c"]
    table = model_table(rows, columns, first="models")
    record_results(
        "i2ce_ensembles",
        {"rows": rows},
        "## I2CE ensembles",
        "An ensemble's cosine is the mean of its members' cosines (top-3 pooled as one model); "
        "its encoder cost is the sum of theirs. dev_auc: mean same-image AUC of the dev splits; "
        "dev_mrr: nearest-caption retrieval MRR (bench/quality/i2ce_dev_retrieval.py); "
        f"expert_tau_c: Flickr8k-Expert Kendall τc × 100, read after choosing on dev.\n\n{table}",
        args.tag,
    )
    print(table)


if __name__ == "__main__":
    main()
