"""I2CE against human judgments on Flickr8k-Expert, beside BLEU, ROUGE-L, CIDEr and METEOR.

METEOR is capsim's Python METEOR 1.5; where Java is present the jar's METEOR
is put beside it, on the same tokenised text, to show the two agree.

    python bench/quality/i2ce_human_judgments.py --data_dir ../shared/data [--epochs 8] \
        [--parallel 4]

Trains each I2CE variant (``python -m i2ce_jax.train`` in a subprocess, up to
``--parallel`` at once) on COCO val2017 captions plus Flickr8k *train-split*
captions (never on captions of Flickr8k test images, which Flickr8k-Expert
judges), with early stopping on held-out COCO/Flickr8k-train images, then
scores the Flickr8k-Expert pairs (CLIPScore protocol: each expert rating is a
row; candidates that are one of their image's references are skipped) and
reports Kendall τc × 100. ``--pretrained`` adds the models shipped in the
package. ``--merge FILE`` adds the I2CE rows (and runs) of an earlier results
JSON, e.g. variants trained on a GPU machine, to this run's table; the table
names each row's source. Writes bench/results/i2ce_flickr8k_expert.json and the
table section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import subprocess
import sys
import time
from pathlib import Path

# bench/ is used from the clone, not installed: make its root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from bench import minilm
from bench.cases.catalogue import PAPER
from bench.harness import REPO, RESULTS_DIR, update_section
from capsim.eval import judgment_harness
from capsim.eval.judgment_sets import load_set
from capsim.metrics.coco_metrics import compute_meteor, meteor_available
from capsim.metrics.pooling import pool_similarities
from capsim.metrics.tfidf import TfidfCosine
from capsim.tables import format_table
from i2ce_jax.scorer import I2CEScorer

RESULTS_JSON = RESULTS_DIR / "i2ce_flickr8k_expert.json"
PLOT_DIR = RESULTS_DIR
SECTION = "## I2CE on Flickr8k-Expert"
CONFIG = "configs/i2ce_coco_margin.py"  # any i2ce_coco_* file: the loss is an argument

# name -> config arguments. The first four are the paper's branches.
VARIANTS = {
    "I2CE-recon": "loss=none",
    "I2CE-margin-mean": "loss=margin,reduction=mean",
    "I2CE-margin-max": "loss=margin,reduction=max",
    "I2CE-triplet": "loss=triplet",
    "I2CE-nce": "loss=infonce",
}
PRETRAINED = {
    "I2CE-pretrained": "base",
    "I2CE-pretrained-large": "large",
    "I2CE-pretrained-research": "research",
}
PLOTTED_MODEL = "I2CE-pretrained"  # drawn against CIDEr in the plots, when scored in this run
POOLING_MODEL = "I2CE-margin-mean"
POOLINGS = [f"top-{k}" for k in range(1, 6)]


def launch(name: str, arg: str, workdir: Path) -> subprocess.Popen:
    workdir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "i2ce_jax.train",
        f"--config={CONFIG}:{arg}",
        f"--workdir={workdir}",
        "--verbosity=-1",
    ]
    log = (workdir / "train.log").open("w")
    print(f"training {name}: {' '.join(command)}", flush=True)
    return subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def best_dev(workdir: Path) -> dict[str, float]:
    """The dev numbers logged at the run's best ``dev/same_image_auc`` (per domain too)."""
    rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "dev/same_image_auc" in r]
    best = max(evals, key=lambda r: r["dev/same_image_auc"])
    return {k.removeprefix("dev/"): v for k, v in best.items() if k.startswith("dev/")}


def finished_runs(variants: dict[str, str], root: Path) -> dict[str, dict]:
    """Summaries of variants already trained under ``root`` (``--reuse``)."""
    runs = {}
    for name, arg in variants.items():
        summary = json.loads((root / name / "results.json").read_text())
        runs[name] = {**summary, "train_seconds": None, "config_arg": arg}
        runs[name]["dev"] = best_dev(root / name)
    return runs


def train_all(variants: dict[str, str], root: Path, parallel: int) -> dict[str, dict]:
    """Trains the variants, ``parallel`` subprocesses at a time; returns each run's summary."""
    pending, running, runs = list(variants.items()), {}, {}
    while pending or running:
        while pending and len(running) < parallel:
            name, arg = pending.pop(0)
            running[name] = (launch(name, arg, root / name), time.perf_counter(), arg)
        time.sleep(2)
        for name, (proc, start, arg) in list(running.items()):
            if proc.poll() is None:
                continue
            del running[name]
            if proc.returncode:
                raise RuntimeError(
                    f"{name} failed (exit {proc.returncode}): see {root / name}/train.log"
                )
            summary = json.loads((root / name / "results.json").read_text())
            runs[name] = {
                **summary,
                "train_seconds": time.perf_counter() - start,
                "config_arg": arg,
                "dev": best_dev(root / name),
            }
            print(f"{name}: {json.dumps(runs[name])}", flush=True)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default="../shared/data")
    parser.add_argument("--workdir", default="/tmp/i2ce_bench")
    parser.add_argument("--epochs", type=float, default=8.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="an extra variant: a name and its config arguments (repeatable)",
    )
    parser.add_argument(
        "--extra",
        default=f"embed={PAPER.embed},hidden={PAPER.hidden}",  # the paper's sizes
        help="config arguments of every variant (a variant's own arguments win)",
    )
    parser.add_argument("--parallel", type=int, default=1, help="variants trained at once")
    parser.add_argument("--pretrained", action="store_true", help="also score the packaged models")
    parser.add_argument(
        "--merge",
        action="append",
        default=[],
        type=Path,
        metavar="JSON",
        help="add the I2CE rows of an earlier results file (repeatable)",
    )
    parser.add_argument("--reuse", action="store_true", help="score existing workdirs, no training")
    parser.add_argument(
        "--tag", default="", help="an extra setting: own JSON file and RESULTS.md section"
    )
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.WARNING)
    data_dir = Path(args.data_dir).resolve()
    variants = {name: VARIANTS[name] for name in filter(None, args.variants.split(","))}
    variants.update(dict(spec.split("=", 1) for spec in args.add))
    common = f"data_dir={data_dir},epochs={args.epochs}"
    variants = {
        name: ",".join(filter(None, [common, args.extra, arg])) for name, arg in variants.items()
    }

    root = Path(args.workdir)
    runs = finished_runs(variants, root) if args.reuse else train_all(variants, root, args.parallel)

    judgments = load_set("flickr8k_expert", data_dir / "flickr8k")
    pairs = judgment_harness.group_judgments(judgments)
    print(f"Flickr8k-Expert: {len(judgments)} ratings of {len(pairs.keys)} pairs", flush=True)
    scores, skipped = judgment_harness.ngram_metric_scores(pairs, include_meteor=True)
    for metric, reason in skipped.items():
        print(f"{metric}: not reported ({reason})")
    gts_tok, res_tok = pairs.tokenized()
    if meteor_available("jar"):  # the jar beside capsim's Python METEOR, once, in the same run
        scores["METEOR (jar, Java)"] = compute_meteor(gts_tok, res_tok, engine="jar")
    scores["TFIDF-top3"] = TfidfCosine(pooling="top-3").compute_score(gts_tok, res_tok)[1]
    if minilm.available():  # the text-only neural metric a user would pick instead
        sims, mask = minilm.MiniLMScorer().similarities(pairs.gts, pairs.res)
        scores["MiniLM-top3"] = pool_similarities(sims, mask, "top-3")
        scores["MiniLM-max"] = pool_similarities(sims, mask, "max")
    else:
        print(f"MiniLM rows: not reported ({minilm.INSTALL_HINT})")

    scorers = {name: (lambda n=name: I2CEScorer.from_checkpoint(root / n)) for name in variants}
    if args.pretrained:
        for name, model in PRETRAINED.items():
            scorers[name] = lambda m=model: I2CEScorer.pretrained(m)
    pooling, pooling_plotted = {}, {}
    for name, load in scorers.items():
        result = load().score(pairs.gts, pairs.res)
        scores[name] = pool_similarities(np.nan_to_num(result.similarities), result.mask, "top-3")
        if name in (POOLING_MODEL, PLOTTED_MODEL):
            curve = pooling if name == POOLING_MODEL else pooling_plotted
            for mode in POOLINGS:
                per_pair = pool_similarities(np.nan_to_num(result.similarities), result.mask, mode)
                curve[mode.replace("top", "max")] = judgment_harness.tau_c_table(
                    pairs, {mode: per_pair}
                )[mode]

    tau_c = judgment_harness.tau_c_table(pairs, scores)
    source = dict.fromkeys(tau_c, "this run")
    for path in args.merge:
        merged = json.loads(path.read_text())
        if merged["rows"] != len(pairs.human):
            raise ValueError(
                f"{path} has {merged['rows']} rating rows, this run {len(pairs.human)}"
            )
        for name, value in merged["tau_c"].items():
            if name.startswith(("I2CE", "P-")) and name not in tau_c:
                tau_c[name], source[name] = value, path.name
        pooling = pooling or merged.get("pooling", {})
        runs.update({k: v for k, v in merged.get("runs", {}).items() if k not in runs})
    command = " ".join(["python", *sys.argv]).replace(str(data_dir), "../shared/data")
    result = {"command": command, "rows": len(pairs.human), "tau_c": tau_c, "pooling": pooling}
    if pooling_plotted:
        result["pooling_pretrained"] = pooling_plotted
    if runs:
        result["runs"] = runs
    out_json = RESULTS_JSON.with_name(
        RESULTS_JSON.stem + (f"_{args.tag}" if args.tag else "") + ".json"
    )
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(result, indent=2) + "\n")

    table = format_table(
        [{"metric": k, "tau_c x100": v, "source": source[k]} for k, v in tau_c.items()],
        ["metric", "tau_c x100", "source"],
    )
    pool_table = format_table(
        [{"pooling": k, "tau_c x100": v} for k, v in pooling.items()], ["pooling", "tau_c x100"]
    )
    run_rows = [
        {
            "variant": name,
            "config": re.sub(r"data_dir=[^,]*,?", "", run["config_arg"]),
            "steps": run["steps"],
            "early stop": run["stopped_early"],
            "dev AUC": run["best_dev_same_image_auc"],
            "dev COCO": run.get("dev", {}).get("same_image_auc_dev_coco", ""),
            "dev Flickr": run.get("dev", {}).get("same_image_auc_dev_flickr", ""),
            "train s": run["train_seconds"] or "",
        }
        for name, run in runs.items()
    ]
    print(table, "\n", pool_table, sep="\n")
    if run_rows:
        print(format_table(run_rows, list(run_rows[0])))
    title = f"{SECTION}: {args.tag}" if args.tag else SECTION
    section = (
        f"{title}\n\n"
        f"Command: `{command}`\n\n"
        f"{len(pairs.human)} rating rows (CLIPScore protocol), Kendall τc × 100. I2CE variants "
        "trained on COCO val2017 + Flickr8k train captions unless their config names `sources`; "
        "early stopping on held-out caption images (same-image AUC; with `sources`, the mean of "
        "the dev COCO and dev Flickr AUCs), never on the judgments. `I2CE-pretrained` is the packaged "
        "model (COCO captions only; see i2ce_jax/pretrained/MODEL_CARD.md). Each trained row "
        "is one seed (docs/reproduction.md says which claims rest on it).\n\n"
        f"{table}\n\nPooling ablation ({POOLING_MODEL}):\n\n{pool_table}\n"
    )
    for path in args.merge:
        merged = json.loads(path.read_text())
        section += (
            f"\nRows from `{path.name}`: trained by `{merged.get('command', '?')}` on "
            f"{merged.get('device', 'this machine')}.{' ' + merged['note'] if 'note' in merged else ''}\n"
        )
    if run_rows:
        section += "\nRuns (dev AUC: held-out caption images; train s: wall time of the run):\n\n"
        section += format_table(run_rows, list(run_rows[0])) + "\n"
    if PLOTTED_MODEL in scores and not args.tag:
        section += plots(pairs, scores, tau_c, pooling_plotted)
    update_section(title, section)


def plots(pairs, scores: dict, tau_c: dict, pooling_curve: dict) -> str:
    """PNGs under bench/results/ (I2CE and CIDEr against the experts, metric correlations,
    the pooling curve) and the markdown that shows them."""
    from capsim import viz
    from capsim.eval.correlation import correlation_matrix

    shown = {PLOTTED_MODEL: scores[PLOTTED_MODEL], "CIDEr": scores["CIDEr"]}
    rows = {name: per_pair[pairs.pair_of_rating] for name, per_pair in shown.items()}
    viz.metric_vs_human(pairs.human, rows, PLOT_DIR / "i2ce_vs_cider_expert.png", statistic=tau_c)
    per_row = {name: per_pair[pairs.pair_of_rating] for name, per_pair in scores.items()}
    names, matrix = correlation_matrix(per_row)
    viz.correlation_heatmap(
        100 * matrix,
        names,
        PLOT_DIR / "metric_correlations_expert.png",
        title="Kendall τc × 100 between metrics (Flickr8k-Expert rows)",
    )
    viz.pooling_curve(pooling_curve, PLOT_DIR / "pooling_curve_pretrained.png")
    return (
        "\n![I2CE and CIDEr against the expert scores](results/i2ce_vs_cider_expert.png)\n\n"
        "![Kendall τc between metrics, over the rating rows](results/metric_correlations_expert.png)\n\n"
        f"![Pooling of the reference similarities, {PLOTTED_MODEL}](results/pooling_curve_pretrained.png)\n"
    )


if __name__ == "__main__":
    main()
