"""Does a sentence-level objective pay on long captions (issue 60, item 4)? I2CE trained
with and without contrast negatives (each anchor with one colour, number or object word
swapped, a negative of its own: ``contrast=True``), judged on the long-caption
development pairs and on the short-caption set.

    python -m i2ce_jax.train --config=configs/i2ce_pretrained.py:model=base,epochs=2.0 --workdir=W0
    python -m i2ce_jax.train \\
        --config=configs/i2ce_pretrained.py:model=base,epochs=2.0,contrast=True --workdir=W1
    python bench/quality/contrast_training.py --run plain=W0 --run contrast=W1 \\
        [--seeds 0,1] [--bootstrap 1000] [--write]

For each run, beside the packaged ``base`` (8 epochs, no contrast) and CIDEr:

1. the development pairs of each ``--seeds`` (capsim.eval.long_caption_pairs, held-out
   dev images only: every run's ``data.seed`` is the packaged base's, whatever its
   training ``config.seed``): ``capsim.metaeval`` accuracy with its 95% interval over
   documents, per corruption category, PERM-BOTH clusters; I2CE by sentences (``auto``)
   and whole;
2. short captions: Flickr8k-Expert τc (a check, never selected on) and the run's best dev
   same-image AUC (held-out training-domain captions: what selection reads).

The colour and count categories are the very swaps the contrast negatives make (the word
lists are capsim.eval.long_caption_pairs'), so they are in-distribution for it; object
swaps partly so; the sentence category and Flickr8k-Expert are not.

``--write`` records the tables in bench/results/contrast_training.json and bench/RESULTS.md
("I2CE on long captions: contrast training").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import tempfile

from bench.harness import SHARED_DATA, load_average, record_results
from bench.quality.pair_reports import metaeval_args, report_table
from capsim import metaeval
from capsim.config_lib import DATA_SEED
from capsim.eval import long_caption_pairs
from capsim.tables import format_cells
from capsim.workdir import load_config
from i2ce_jax import pretrained
from i2ce_jax.scorer import WHOLE, I2CEScorer

SECTION = "## I2CE on long captions"


def scorers(runs: dict[str, Path], ways: tuple[str, ...]) -> dict:
    """``metaeval.run``'s I2CE columns: each run's checkpoint and the packaged base, each way."""
    columns = {}
    for name, workdir in {"packaged base": None, **runs}.items():
        for way in ways:

            def build(workdir=workdir, way=way):
                if workdir is None:
                    return I2CEScorer.pretrained("base", sentences=way).compute_score
                return I2CEScorer.from_checkpoint(workdir, sentences=way).compute_score

            columns[f"I2CE {name} ({way})"] = build
    return columns


def pairs_report(runs: dict[str, Path], seed: int, bootstrap: int, tmp: Path) -> dict:
    path = tmp / f"long_pairs_{seed}.jsonl"
    rows = long_caption_pairs.generate(long_caption_pairs.dev_images(SHARED_DATA), seed)
    long_caption_pairs.write_pairs(rows, path)
    out = tmp / f"pairs_{seed}.json"
    columns = scorers(runs, ("auto", WHOLE))
    args = metaeval_args(f"pairs:{path}", out, bootstrap, ",".join(["CIDEr", *columns]))
    metaeval.run(args, columns)
    return json.loads(out.read_text())


def short_captions(runs: dict[str, Path], tmp: Path) -> list[dict]:
    out = tmp / "expert.json"
    columns = scorers(runs, ("auto",))
    args = metaeval_args(f"flickr8k_expert:{SHARED_DATA / 'flickr8k'}", out, 0, ",".join(columns))
    metaeval.run(args, columns)
    metrics = next(iter(json.loads(out.read_text())["sets"].values()))["metrics"]
    rows = []
    for name, workdir in {"packaged base": None, **runs}.items():
        tau = metrics[f"I2CE {name} (auto)"]["tau_c"]
        if workdir is None:
            meta = pretrained.load("base")[2]
            auc, steps = meta["dev_same_image_auc"], meta["steps"]
        else:
            result = json.loads((Path(workdir) / "results.json").read_text())
            auc, steps = result["best_dev_same_image_auc"], result["steps"]
        rows.append({"model": name, "steps": steps, "dev_auc": auc,
                     "expert_tau_c": tau["value"] if isinstance(tau, dict) else tau})  # fmt: skip
    return rows


def short_table(rows: list[dict]) -> str:
    header = ["model", "steps", "dev same-image AUC", "Flickr8k-Expert τc"]
    cells = [[r["model"], str(r["steps"]), f"{r['dev_auc']:.2f}", f"{r['expert_tau_c']:.2f}"]
             for r in rows]  # fmt: skip
    return format_cells(header, cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", required=True, help="NAME=WORKDIR")
    parser.add_argument("--seeds", default="0,1", help="the pair sets' seeds")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    runs = {}
    for spec in args.run:
        name, _, workdir = spec.partition("=")
        if not (Path(workdir) / "results.json").is_file():
            parser.error(f"--run {spec}: no results.json in {workdir} (train it first)")
        if load_config(workdir).data.seed != DATA_SEED:  # the pairs' images must be held out
            parser.error(f"--run {spec}: data.seed is not the packaged base's ({DATA_SEED})")
        runs[name] = Path(workdir)
    found: dict = {"load_before": load_average(), "runs": {k: str(v) for k, v in runs.items()}}
    texts = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (int(s) for s in args.seeds.split(",")):
            result = pairs_report(runs, seed, args.bootstrap, Path(tmp))
            found[f"pairs_seed{seed}"] = result
            texts.append(f"Development pairs, seed {seed}:\n\n{report_table(result)}")
            print(texts[-1], flush=True)
        found["short"] = short_captions(runs, Path(tmp))
    texts.append(f"Short captions:\n\n{short_table(found['short'])}")
    print(texts[-1])
    found["load_after"] = load_average()
    if args.write:
        section = f"{SECTION}: contrast training"
        record_results("contrast_training", found, section, "\n\n".join(texts))


if __name__ == "__main__":
    main()
