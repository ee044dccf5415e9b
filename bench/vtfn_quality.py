"""VTFN figures: shapes world, COCO (object-label features) and STS 2012-2016.

    python bench/vtfn_quality.py --data_dir ../shared/data [--only shapes,coco] [--skip_ablation]

Trains every model through ``vtfn_jax.train.train_and_evaluate`` (the same
harness users run), then writes bench/results/vtfn.json and the VTFN section
of bench/RESULTS.md. Real-data VTFN models are trained on COCO val2017 captions
with COCO *object labels* as the image features (80-d multi-hot, IDF-weighted):
no CNN features of COCO images exist on this machine, so these are a coarse,
real, image-derived stand-in, not InceptionV3. Test images (500) and dev images
(250, for early stopping) are held out of training; STS is never trained or
tuned on. The ablation (encoder × loss on the shapes world) runs through the
local sweep runner.
"""

from __future__ import annotations

import sys
from pathlib import Path

# configs/ is used from the clone, not installed: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import importlib
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

from capsim.eval.correlation import format_table
from vtfn_jax.train import train_and_evaluate

from results_md import update_section

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_JSON = BENCH_DIR / "results" / "vtfn.json"
SECTION = "## VTFN"

# Text baselines see every caption of the training images; word2vec also reads
# Flickr8k train captions (the "COCO val2017 plus Flickr8k train").
ALL_CAPTIONS = "captions=all"

# model name -> (config module, extra config argument). "one" caption per image is the paper's setting.
COCO_MODELS = {
    "VTFN-BOW": ("coco_bow", "captions=one"),
    "VTFN-GRU": ("coco_gru", "captions=one"),
    "VTFN-LSTM": ("coco_lstm", "captions=one"),
    "VTFN-CNN": ("coco_cnn", "captions=one"),
    "VTFN-BOW (5 captions)": ("coco_bow", "captions=all,epochs=4"),
    "VTFN-GRU (5 captions)": ("coco_gru", "captions=all,epochs=4"),
    "VTFN-CNN (5 captions)": ("coco_cnn", "captions=all,epochs=4"),
    "VTFN-BOW+pivot": ("coco_bow", "captions=all,epochs=4,pivot=1.0"),
    "CaptionPivot": ("coco_bow", "captions=all,epochs=4,pivot=1.0,image=0.0"),
    "word2vec": ("baseline_word2vec", f"{ALL_CAPTIONS},extra_flickr8k=flickr8k"),
    "PureTextRNN": ("baseline_pure_text_rnn", f"{ALL_CAPTIONS},epochs=4"),
    "PinModelA": ("baseline_pin_model_a", f"{ALL_CAPTIONS},epochs=4"),
    "GloVe-50d-R": ("baseline_glove_r", ALL_CAPTIONS),
    "GloVe-50d-NR": ("baseline_glove_nr", ""),
}
SHAPES_MODELS = {
    "VTFN-BOW": ("demo_bow", ""),
    "VTFN-GRU": ("demo_gru", ""),
    "VTFN-LSTM": ("demo_lstm", ""),
    "VTFN-CNN": ("demo_cnn", ""),
    "CaptionPivot": ("demo_bow", "captions=all,pivot=1.0,image=0.0"),
    "word2vec": ("baseline_word2vec", f"source=shapes_world,{ALL_CAPTIONS}"),
    "PureTextRNN": ("baseline_pure_text_rnn", f"source=shapes_world,{ALL_CAPTIONS}"),
    "GloVe-50d-NR": ("baseline_glove_nr", "source=shapes_world"),
}
STS_YEARS = ("STS12", "STS13", "STS14", "STS15", "STS16")
STS_KEYS = ("pearson_mean", "spearman_mean", "spearman_wmean", "spearman_all")


def run_model(module: str, arg: str, workdir: Path, extra: str, reuse: bool) -> dict:
    """Trains and evaluates one model; with ``reuse``, a finished workdir is read back instead."""
    arg = ",".join(filter(None, [arg, extra]))
    timing = workdir / "bench_seconds.json"
    if reuse and (workdir / "results.json").exists():
        results = json.loads((workdir / "results.json").read_text())
        results["seconds"] = json.loads(timing.read_text()) if timing.exists() else None
    else:
        config = importlib.import_module(f"configs.{module}").get_config(arg)
        start = time.perf_counter()
        results = train_and_evaluate(config, workdir)
        results["seconds"] = time.perf_counter() - start
        timing.write_text(json.dumps(results["seconds"]))
    results["config"] = f"configs/{module}.py:{arg}"
    return results


def shapes_row(r: dict) -> dict:
    return {k: r["shapes"][k] for k in ("graded_spearman", "synonym_spearman", "same_diff_auc")}


def coco_row(r: dict) -> dict:
    retrieval = r.get("retrieval")
    return {
        "same_diff_pearson": r["same_diff"]["pearson"],
        "same_diff_auc": r["same_diff"]["auc"],
        "mrr_caption_to_image": retrieval["c2i_mrr"] if retrieval else None,
    }


def sts_row(r: dict) -> dict:
    out = {year: {k: r["sts"][year][k] for k in STS_KEYS} for year in STS_YEARS}
    out["images"] = {
        f"{year}-images": r["sts"][year]["subsets"]["images"]["spearman"]
        for year in ("STS14", "STS15")
    }
    out["avg2016"] = r["sts"]["avg2016"]
    return out


ABLATION_ARG = "dataset=shapes_world,encoder=bow_sum+gru+cnn,epochs=15"


def run_ablation(workdir: Path) -> str:
    """Encoder × loss on the shapes world via the local sweep runner; returns its markdown table."""
    out = workdir / "ablation"
    cmd = [
        sys.executable,
        "-m",
        "launch.sweep",
        f"--config=configs/sweep_vtfn.py:{ABLATION_ARG}",
        f"--workdir={out}",
    ]
    subprocess.run(cmd, cwd=REPO, check=False)
    table = out / "results.md"
    if not table.exists():
        return "(ablation failed: see its logs)\n"
    lines = table.read_text().splitlines()
    return "\n".join(line for line in lines if not line.startswith("# ")).strip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default="../shared/data")
    parser.add_argument("--workdir", default="/tmp/vtfn_bench")
    parser.add_argument("--only", default="shapes,coco", help="which of shapes,coco to run")
    parser.add_argument("--skip_ablation", action="store_true")
    parser.add_argument(
        "--extra", default="", help="config arguments added to every model (e.g. runlocal)"
    )
    parser.add_argument("--reuse", action="store_true", help="read finished workdirs back")
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.WARNING)
    data_dir = str(Path(args.data_dir).resolve())
    workdir = Path(args.workdir)
    parts = set(args.only.split(","))
    previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {}
    result = {k: previous.get(k, {}) for k in ("shapes_world", "coco_objects", "sts")}
    runs: list[dict] = []

    if "shapes" in parts:
        for name, (module, arg) in SHAPES_MODELS.items():
            r = run_model(module, arg, workdir / "shapes" / name, args.extra, args.reuse)
            result["shapes_world"][name] = shapes_row(r)
            runs.append(
                {"part": "shapes", "model": name, "config": r["config"], "seconds": r["seconds"]}
            )
            print(name, json.dumps(result["shapes_world"][name]), flush=True)
    if "coco" in parts:
        for name, (module, arg) in COCO_MODELS.items():
            full_arg = ",".join(filter(None, [f"data_dir={data_dir}", arg]))
            r = run_model(module, full_arg, workdir / "coco" / name, args.extra, args.reuse)
            result["coco_objects"][name] = coco_row(r)
            result["sts"][name] = sts_row(r)
            runs.append(
                {"part": "coco", "model": name, "config": r["config"], "seconds": r["seconds"]}
            )
            print(name, json.dumps(result["coco_objects"][name]), flush=True)

    RESULTS_JSON.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_JSON.write_text(json.dumps(result, indent=2) + "\n")
    ablation = "" if args.skip_ablation else run_ablation(workdir)
    update_section(SECTION, render(result, runs, ablation, args))


def render(result: dict, runs: list[dict], ablation: str, args) -> str:
    shapes = format_table(
        [{"model": m, **row} for m, row in result["shapes_world"].items()],
        ["model", "graded_spearman", "synonym_spearman", "same_diff_auc"],
    )
    coco = format_table(
        [
            {"model": m, **row, **result["sts"].get(m, {}).get("images", {})}
            for m, row in result["coco_objects"].items()
        ],
        [
            "model",
            "same_diff_pearson",
            "same_diff_auc",
            "mrr_caption_to_image",
            "STS14-images",
            "STS15-images",
        ],
    )
    sts = format_table(
        [
            {"model": m, **{y: r[y]["spearman_mean"] for y in STS_YEARS}, "avg2016": r["avg2016"]}
            for m, r in result["sts"].items()
        ],
        ["model", *STS_YEARS, "avg2016"],
    )
    run_table = format_table(runs, ["part", "model", "config", "seconds"]) if runs else ""
    return (
        f"{SECTION}\n\nCommand: `python bench/vtfn_quality.py --data_dir ../shared/data"
        f"{' --only ' + args.only if args.only != 'shapes,coco' else ''}`. All correlations × 100.\n\n"
        "### Shapes world (test scenes)\n\n" + shapes + "\n\n"
        "### COCO val2017, object-label features (not CNN features), 500 held-out test images\n\n"
        + coco
        + "\n\n"
        "### STS 2012-2016, Spearman × 100 (mean over subsets per year); avg2016 is Pearson\n\n"
        + sts
        + "\n\n"
        + (
            f"### Ablation: encoder × loss on the shapes world (`{ABLATION_ARG}`)\n\n{ablation}\n"
            if ablation
            else ""
        )
        + (f"### Runs\n\n{run_table}\n" if run_table else "")
    )


if __name__ == "__main__":
    main()
