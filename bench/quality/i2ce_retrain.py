"""Packaged I2CE models before and after a retraining, side by side in one run.

    python bench/quality/i2ce_retrain.py --data_dir ../shared/data \
        --run base-before=DIR --run base-after=DIR ... [--rounds 3] [--tag karpathy]

``DIR`` is an exported model folder or a training workdir. Per model:

* held-out same-image AUC per dev split (``dev_coco``, ``dev_flickr``): the
  early-stopping measure, recomputed here on the same pairs the trainer drew;
* held-out caption retrieval MRR per split (bench/quality/i2ce_dev_retrieval.py);
* Flickr8k-Expert Kendall τc × 100, top-3 pooling: read, never chosen on;
* speed: captions/s on the Flickr8k-Expert candidates, as a ratio to
  all-MiniLM-L6-v2 top-3 timed in the same alternating rounds (median, min,
  max, load average), when the bench extra is installed.

Writes bench/results/i2ce_retrain[_TAG].json and a RESULTS.md section.
"""

from __future__ import annotations

import logging
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from bench import minilm
from bench.harness import (
    GOLDEN_FILE,
    load_average,
    load_golden_pairs,
    ratio_summary,
    time_rounds,
)
from bench.quality.dev_captions import (
    dev_splits,
    evaluate,
    model_loaders,
    model_parser,
    model_table,
    record_dev_rows,
)
from capsim.eval import judgment_harness
from capsim.eval.judgment_sets import load_set
from capsim.eval.same_diff import evaluate_same_diff, make_same_diff_pairs
from capsim.metrics.pooling import pool_similarities
from i2ce_jax.scorer import I2CEScorer


def same_image_auc(scorer: I2CEScorer, splits: dict[str, list]) -> dict[str, float]:
    """The trainer's dev AUC per split: the same pairs (sorted images, seed 0)."""
    row = {}
    for name, records in splits.items():
        by_image: dict[str, list[str]] = defaultdict(list)
        for record in records:
            by_image[record.image_id].append(record.text)
        row[f"{name}_auc"] = evaluate_same_diff(scorer.embed, make_same_diff_pairs(by_image))["auc"]
    row["mean_auc"] = float(np.mean([row[f"{name}_auc"] for name in splits]))
    return row


def expert_tau_c(scorers: dict[str, I2CEScorer], data_dir: Path) -> dict[str, float]:
    """Kendall τc × 100 of each model's top-3 score on Flickr8k-Expert (CLIPScore protocol)."""
    pairs = judgment_harness.group_judgments(load_set("flickr8k_expert", data_dir / "flickr8k"))
    scores = {}
    for name, scorer in scorers.items():
        result = scorer.score(pairs.gts, pairs.res)
        scores[name] = pool_similarities(np.nan_to_num(result.similarities), result.mask, "top-3")
    return judgment_harness.tau_c_table(pairs, scores)


def speed_vs_minilm(scorers: dict[str, I2CEScorer], rounds: int) -> dict[str, dict]:
    """Each model's captions/s and its ratio to MiniLM top-3, per alternating round."""
    gts, res = load_golden_pairs(GOLDEN_FILE, None)
    runners = {
        name: (lambda s=scorer: s.compute_score(gts, res)) for name, scorer in scorers.items()
    }
    reference = minilm.MiniLMScorer()
    runners["minilm"] = lambda: reference.compute_score(gts, res)
    for run in runners.values():  # warmup: compiles every length bucket, loads MiniLM
        run()
    load_start = load_average()
    seconds = time_rounds({n: (lambda i, run=run: run()) for n, run in runners.items()}, rounds)
    load = f"{load_start:.2f} / {load_average():.2f}"
    return {
        name: {
            "captions_per_s": len(res) / float(np.median(seconds[name])),
            **ratio_summary(seconds[name], seconds["minilm"]),
            "load": load,
        }
        for name in scorers
    }


def main() -> None:
    parser = model_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating speed rounds")
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.WARNING)
    data_dir = args.data_dir.resolve()
    scorers = {name: load() for name, load in model_loaders(args).items()}
    splits = dev_splits(data_dir)
    rows = {
        name: {**same_image_auc(s, splits), **evaluate(s, splits)} for name, s in scorers.items()
    }
    for name, tau_c in expert_tau_c(scorers, data_dir).items():
        rows[name]["expert_tau_c"] = tau_c
    if minilm.available():
        for name, speed in speed_vs_minilm(scorers, args.rounds).items():
            rows[name].update(
                captions_per_s=speed["captions_per_s"],
                x_minilm=f"{speed['ratio_median']:.1f} ({speed['ratio_min']:.1f}-"
                f"{speed['ratio_max']:.1f}; load {speed['load']})",
            )
    else:
        print(f"speed: not measured ({minilm.INSTALL_HINT})")
    columns = [
        "dev_coco_auc",
        "dev_flickr_auc",
        "mean_auc",
        "dev_coco_mrr",
        "dev_flickr_mrr",
        "mean_mrr",
        "expert_tau_c",
        "captions_per_s",
        "x_minilm",
    ]
    table = model_table(rows, [c for c in columns if any(c in row for row in rows.values())])
    print(table)
    record_dev_rows(
        "i2ce_retrain",
        "## I2CE packaged models before and after retraining",
        splits,
        rows,
        ". AUC and MRR × 100 on the dev splits every candidate's "
        "early stopping watched; Expert τc × 100 (top-3, CLIPScore protocol), read after the "
        "choice; speed on the 5,664 Flickr8k-Expert candidates, × all-MiniLM-L6-v2 top-3 as "
        f"median (min-max) of {args.rounds} alternating rounds.\n\n{table}",
        args.tag,
    )


if __name__ == "__main__":
    main()
