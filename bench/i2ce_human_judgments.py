"""I2CE against human judgments on Flickr8k-Expert, beside BLEU, ROUGE-L, CIDEr and METEOR.

    python bench/i2ce_human_judgments.py --data_dir ../shared/data [--epochs 4]

Trains each I2CE variant on COCO val2017 captions plus Flickr8k *train-split*
captions (never on captions of Flickr8k test images, which Flickr8k-Expert
judges), with early stopping on held-out COCO/Flickr8k-train images, then
scores the Flickr8k-Expert pairs (CLIPScore protocol: each expert rating is a
row; candidates that are one of their image's references are skipped) and
reports Kendall τc × 100. Writes bench/results/i2ce_flickr8k_expert.json and
the table section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np

from capsim.data.judgments import read_flickr8k_expert
from capsim.eval import judgment_harness
from capsim.eval.correlation import format_table
from capsim.eval.pooling import pool_similarities
from capsim.eval.tfidf import TfidfCosine
from configs import common
from i2ce_jax.scorer import I2CEScorer
from i2ce_jax.train import train_and_evaluate

from results_md import update_section

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_JSON = BENCH_DIR / "results" / "i2ce_flickr8k_expert.json"
SECTION = "## I2CE on Flickr8k-Expert"

# name -> (loss, extra config arguments). The first four are the paper's branches.
VARIANTS = {
    "I2CE-recon": ("none", ""),
    "I2CE-margin-mean": ("margin", "reduction=mean"),
    "I2CE-margin-max": ("margin", "reduction=max"),
    "I2CE-triplet": ("triplet", ""),
    "I2CE-nce": ("infonce", ""),
}
POOLING_MODEL = "I2CE-margin-mean"
POOLINGS = [f"top-{k}" for k in range(1, 6)]


def train_variant(name: str, data_dir: str, epochs: float, workdir: Path, extra: str) -> dict:
    loss, args = VARIANTS[name]
    arg = ",".join(filter(None, [f"data_dir={data_dir}", f"epochs={epochs}", args, extra]))
    config = common.i2ce_files_config(arg, loss=loss)
    config.eval.include_meteor = False
    start = time.perf_counter()
    summary = train_and_evaluate(config, workdir)
    summary["train_seconds"] = time.perf_counter() - start
    summary["config_arg"] = arg
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default="../shared/data")
    parser.add_argument("--workdir", default="/tmp/i2ce_bench")
    parser.add_argument("--epochs", type=float, default=4.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--extra", default="", help="config arguments added to every variant")
    parser.add_argument("--reuse", action="store_true", help="score existing workdirs, no training")
    parser.add_argument(
        "--tag", default="", help="an extra setting: own JSON file and RESULTS.md section"
    )
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.WARNING)
    data_dir = Path(args.data_dir).resolve()
    flickr = data_dir / "flickr8k"

    judgments = read_flickr8k_expert(flickr / "ExpertAnnotations.txt", flickr / "Flickr8k.token.txt")
    pairs = judgment_harness.group_judgments(judgments)
    print(f"Flickr8k-Expert: {len(judgments)} ratings of {len(pairs.keys)} pairs", flush=True)
    scores, skipped = judgment_harness.ngram_metric_scores(pairs, include_meteor=True)
    for metric, reason in skipped.items():
        print(f"{metric}: not reported ({reason})")
    gts_tok, res_tok = pairs.tokenized()
    scores["TFIDF-top3"] = TfidfCosine(pooling="top-3").compute_score(gts_tok, res_tok)[1]

    runs, pooling = {}, {}
    for name in filter(None, args.variants.split(",")):
        workdir = Path(args.workdir) / name
        if not args.reuse:
            runs[name] = train_variant(name, str(data_dir), args.epochs, workdir, args.extra)
            print(f"{name}: {json.dumps(runs[name])}", flush=True)
        scorer = I2CEScorer.from_checkpoint(workdir)
        sims = scorer.reference_similarities(pairs.gts, pairs.res)
        similarities = np.nan_to_num(sims.similarities)
        scores[name] = pool_similarities(similarities, sims.mask, mode="top-3")
        if name == POOLING_MODEL:
            for mode in POOLINGS:
                per_pair = pool_similarities(similarities, sims.mask, mode=mode)
                pooling[mode.replace("top", "max")] = judgment_harness.tau_c_table(
                    pairs, {mode: per_pair}
                )[mode]

    tau_c = judgment_harness.tau_c_table(pairs, scores)
    result = {"rows": len(pairs.human), "tau_c": tau_c, "pooling": pooling}
    out_json = RESULTS_JSON.with_name(
        RESULTS_JSON.stem + (f"_{args.tag}" if args.tag else "") + ".json"
    )
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(result, indent=2) + "\n")

    table = format_table(
        [{"metric": k, "tau_c x100": v} for k, v in tau_c.items()], ["metric", "tau_c x100"]
    )
    pool_table = format_table(
        [{"pooling": k, "tau_c x100": v} for k, v in pooling.items()], ["pooling", "tau_c x100"]
    )
    run_rows = [
        {
            "variant": name,
            "config": run["config_arg"],
            "steps": run["steps"],
            "early stop": run["stopped_early"],
            "dev AUC": run["best_dev_same_image_auc"],
            "train s": run["train_seconds"],
        }
        for name, run in runs.items()
    ]
    print(table, "\n", pool_table, sep="\n")
    title = f"{SECTION}: {args.tag}" if args.tag else SECTION
    section = (
        f"{title}\n\n"
        f"Command: `python bench/i2ce_human_judgments.py --data_dir ../shared/data "
        f"--epochs {args.epochs} --variants {args.variants}"
        f"{' --extra ' + args.extra if args.extra else ''}"
        f"{' --tag ' + args.tag if args.tag else ''}{' --reuse' if args.reuse else ''}`\n\n"
        f"{len(pairs.human)} rating rows (CLIPScore protocol), Kendall τc × 100. I2CE trained "
        "on COCO val2017 + Flickr8k train captions; early stopping on held-out caption "
        "images (same-image AUC), never on the judgments.\n\n"
        f"{table}\n\nPooling ablation ({POOLING_MODEL}):\n\n{pool_table}\n"
    )
    if run_rows:
        columns = ["variant", "config", "steps", "early stop", "dev AUC", "train s"]
        section += f"\nRuns:\n\n{format_table(run_rows, columns)}\n"
    update_section(title, section)


if __name__ == "__main__":
    main()
