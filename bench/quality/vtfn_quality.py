"""VTFN figures: shapes world, COCO (object-label features) and STS 2012-2016.

    python bench/quality/vtfn_quality.py --data_dir ../shared/data [--only shapes,coco] \
        [--skip_ablation]
    python bench/quality/vtfn_quality.py --only calibration,glove,scale --reuse   # issue 8

Trains every model through ``vtfn_jax.train.train_and_evaluate`` (the same
harness users run), then writes bench/results/vtfn.json and the VTFN section
of bench/RESULTS.md. Real-data VTFN models are trained on COCO val2017 captions
with COCO *object labels* as the image features (80-d multi-hot, IDF-weighted):
no CNN features of COCO images exist on this machine, so these are a coarse,
real, image-derived stand-in, not InceptionV3. Test images (500) and dev images
(250, for early stopping) are held out of training; STS is never trained or
tuned on. The ablation (encoder × loss on the shapes world) runs through the
local sweep runner. Issue 8 adds three groups: ``calibration`` (VTFN-BOW settings,
chosen on dev AUC), ``glove`` (towers started from GloVe 6B 50d, against
GloVe-50d-NR on every STS subset) and ``scale`` (VTFN-BOW and word2vec on nested
fractions of the training images, plotted to bench/results/vtfn_data_scale.png).
Each group updates its part of vtfn.json; the section is rendered from all of it.
"""

from __future__ import annotations

import sys
from pathlib import Path

# configs/ is used from the clone, not installed: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import importlib
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

from bench.harness import REPO, update_section
from bench.quality.vtfn_figures import (
    ABLATION_ARG,
    CALIBRATED_MODELS,
    CALIBRATION_SETTINGS,
    CAPTION_EPOCHS,
    COCO_MODELS,
    FRACTIONS,
    GLOVE_CHOICES,
    GLOVE_MODELS,
    GLOVE_REFERENCE,
    RESULT_KEYS,
    RESULTS_JSON,
    SCALE_MODELS,
    SCALE_PLOT,
    SECTION,
    SHAPES_MODELS,
    calibration_arg,
    calibration_row,
    coco_row,
    plot_scale,
    render,
    shapes_row,
    sts_row,
    sts_subsets_row,
)
from vtfn_jax.data import prepare_data
from vtfn_jax.train import train_and_evaluate


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


class Bench:
    """Runs models into ``workdir/<part>/<name>`` and keeps the results and the run list."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.data_dir = str(Path(args.data_dir).resolve())
        previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {}
        self.result = {k: previous.get(k, {}) for k in RESULT_KEYS}

    def files(self, arg: str) -> str:
        """``arg`` for a model trained on the caption files under --data_dir."""
        return ",".join(filter(None, [f"data_dir={self.data_dir}", arg]))

    def run(self, part: str, name: str, module: str, arg: str) -> dict:
        r = run_model(
            module, arg, Path(self.args.workdir) / part / name, self.args.extra, self.args.reuse
        )
        self.result["runs"][f"{part}/{name}"] = {"config": r["config"], "seconds": r["seconds"]}
        return r

    def coco(self, part: str, name: str, module: str, arg: str) -> dict:
        """A COCO model reported in the COCO and STS tables."""
        r = self.run(part, name, module, arg)
        self.result["coco_objects"][name] = coco_row(r)
        self.result["sts"][name] = sts_row(r)
        print(name, json.dumps(self.result["coco_objects"][name]), flush=True)
        return r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default="../shared/data")
    parser.add_argument("--workdir", default="/tmp/vtfn_bench")
    parser.add_argument("--only", default="shapes,coco", help=f"which of {','.join(GROUPS)} to run")
    parser.add_argument("--skip_ablation", action="store_true")
    parser.add_argument(
        "--extra", default="", help="config arguments added to every model (e.g. runlocal)"
    )
    parser.add_argument("--reuse", action="store_true", help="read finished workdirs back")
    args = parser.parse_args()
    logging.getLogger().setLevel(logging.WARNING)
    parts = args.only.split(",")
    unknown = sorted(set(parts) - set(GROUPS))
    if unknown:
        parser.error(f"unknown --only groups {unknown}; known: {GROUPS}")
    bench = Bench(args)
    for part in parts:
        GROUPS[part](bench)
        RESULTS_JSON.parent.mkdir(parents=True, exist_ok=True)
        RESULTS_JSON.write_text(json.dumps(bench.result, indent=2) + "\n")
    if "shapes" in parts and not args.skip_ablation:
        bench.result["ablation"] = {"markdown": run_ablation(Path(args.workdir))}
        RESULTS_JSON.write_text(json.dumps(bench.result, indent=2) + "\n")
    update_section(SECTION, render(bench.result))


def run_shapes(bench: Bench) -> None:
    for name, (module, arg) in SHAPES_MODELS.items():
        r = bench.run("shapes", name, module, arg)
        bench.result["shapes_world"][name] = shapes_row(r)
        print(name, json.dumps(bench.result["shapes_world"][name]), flush=True)


def run_coco(bench: Bench) -> None:
    for name, (module, arg) in COCO_MODELS.items():
        bench.coco("coco", name, module, bench.files(arg))


def run_calibration(bench: Bench) -> None:
    """§1: every calibration setting in both caption settings, then the chosen one in the
    COCO and STS tables."""
    for captions in CAPTION_EPOCHS:
        for setting in CALIBRATION_SETTINGS:
            name = f"{captions}: {setting}"
            arg = bench.files(calibration_arg(captions, setting))
            r = bench.run("calibration", name, "coco_bow", arg)
            bench.result["calibration"][name] = calibration_row(r)
            print(name, json.dumps(bench.result["calibration"][name]), flush=True)
    for name, arg in CALIBRATED_MODELS.items():
        bench.coco("coco", name, "coco_bow", bench.files(arg))


def run_glove(bench: Bench) -> None:
    """§2: GloVe-initialised towers with and without the pivot term; each BOW variant keeps
    the learning rate with the best dev AUC under the issue's name."""
    dev = {}
    for name, (module, arg) in GLOVE_MODELS.items():
        r = bench.coco("glove", name, module, bench.files(arg))
        bench.result["sts_subsets"][name] = sts_subsets_row(r)
        dev[name] = r["train"]["best_dev_same_image_auc"]
    for name, candidates in GLOVE_CHOICES.items():
        best = max(candidates, key=dev.__getitem__)
        bench.result["coco_objects"][name] = bench.result["coco_objects"][best]
        bench.result["sts"][name] = bench.result["sts"][best]
        bench.result["sts_subsets"][name] = bench.result["sts_subsets"][best]
        bench.result["glove_choice"][name] = {
            "setting": best,
            "dev_auc": {c: dev[c] for c in candidates},
        }
    module, arg = COCO_MODELS[GLOVE_REFERENCE]
    reference = bench.run("coco", GLOVE_REFERENCE, module, bench.files(arg))
    bench.result["sts_subsets"][GLOVE_REFERENCE] = sts_subsets_row(reference)


def train_images(module: str, arg: str) -> int:
    """How many training images a config sees."""
    config = importlib.import_module(f"configs.{module}").get_config(arg)
    return len(prepare_data(config).splits["train"].corpus.image_ids)


def run_scale(bench: Bench) -> None:
    """§3: same/different AUC (and, on COCO, STS14/15-images) against training images."""
    for world, models in SCALE_MODELS.items():
        for model, (module, arg, epochs_key, epochs) in models.items():
            for fraction in FRACTIONS:
                full = f"{arg},fraction={fraction},{epochs_key}={type(epochs)(epochs / fraction)}"
                full = bench.files(full) if world == "coco" else full
                r = bench.run("scale", f"{world} {model} {fraction}", module, full)
                row = {
                    "world": world,
                    "model": model,
                    "fraction": fraction,
                    "images": train_images(module, full),
                    "same_diff_auc": r["same_diff"]["auc"],
                }
                if world == "coco":
                    row.update(sts_row(r)["images"])
                bench.result["scale"][f"{world} {model} {fraction}"] = row
                print(json.dumps(row), flush=True)
    plot_scale(list(bench.result["scale"].values()), SCALE_PLOT)


GROUPS = {  # vtfn_figures.GROUP_NAMES
    "shapes": run_shapes,
    "coco": run_coco,
    "calibration": run_calibration,
    "glove": run_glove,
    "scale": run_scale,
}


if __name__ == "__main__":
    main()
