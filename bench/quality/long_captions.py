"""I2CE on long captions (issue 60): the aggregation sweep, the pair-set report, Expert.

    python bench/quality/long_captions.py [--only sweep,report,expert] [--seed 0]
        [--bootstrap 1000] [--write]

The development pairs are generated first (capsim.eval.long_caption_pairs, ``--seed``,
held-out dev images only) into a temporary file. Then:

1. ``sweep``: every sentence setting tried, per packaged model (``base``, ``research``):
   the aggregation over sentences (mean, min, soft minima), the weighting (none, length)
   and the F-beta (0 is precision alone; "recall" is recall alone), each pair set's
   accuracy with a 95% bootstrap interval over documents; the sentences of the set are
   embedded once per model, and each setting re-aligns them. The one-vector way beside.
2. ``report``: ``capsim.metaeval`` on the pairs file (every built-in metric, I2CE of
   both models both ways, ``--bootstrap`` resamples of documents, PERM-BOTH clusters).
3. ``swap``: the same report on the meta-evaluation bench's 500 generated paragraph
   pairs (bench/quality/metaeval_report.py: 20-image documents of any COCO val2017
   images, a quarter or a half of the sentences swapped for another document's), a
   second check that nothing was tuned on; ``base`` was trained on most of those captions.
4. ``expert``: Flickr8k-Expert τc of ``base`` by the default way (``auto``) and whole,
   how many captions went by sentences and the largest score change of those that did
   not (0.0: bit for bit).

``--write`` records the tables in bench/results/long_captions*.json and bench/RESULTS.md
("I2CE on long captions: ...").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import itertools
import json
import tempfile

import numpy as np

from bench.harness import SHARED_DATA, load_average, record_results
from bench.quality.pair_reports import metaeval_args, report_table
from bench.quality.swap_pairs import write_long_pairs
from capsim import metaeval
from capsim.data.judgment_files import read_caption_pairs
from capsim.eval import long_caption_pairs
from capsim.eval.pairwise_sets import preference_pairs
from capsim.metrics.pooling import pool_similarities
from capsim.tables import format_cells
from i2ce_jax.scorer import SENTENCES, WHOLE, I2CEScorer, SentencePlan

SECTION = "## I2CE on long captions"
MODELS = ("base", "research")
AGGREGATIONS = ("mean", "softmin-0.3", "softmin-0.1", "softmin-0.03", "min")
WEIGHTINGS = ("none", "length")
BETAS = (0.0, 0.5, 1.0, 2.0, "recall")
RESAMPLES = 1000


def accuracy(scores: np.ndarray, images: list[str], seed: int = 0) -> tuple[float, float, float]:
    """Accuracy × 100 (better strictly above worse) and its 95% interval over documents."""
    right = (scores[0::2] > scores[1::2]).astype(np.float64)
    groups = {g: i for i, g in enumerate(dict.fromkeys(images))}
    index = np.array([groups[g] for g in images])
    per_group = np.bincount(index, right, len(groups))
    counts = np.bincount(index, minlength=len(groups))
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(groups), (RESAMPLES, len(groups)))
    resampled = per_group[draws].sum(axis=1) / counts[draws].sum(axis=1)
    low, high = np.percentile(resampled, [2.5, 97.5])
    return 100 * right.mean(), 100 * low, 100 * high


def sweep(path: Path) -> list[dict]:
    """Accuracy of every sentence setting and of the whole way, per model."""
    judgments = read_caption_pairs(path)
    pairs = preference_pairs(judgments, num_references=None)
    keys = list(pairs.res)
    rows = []
    for model in MODELS:
        scorer = I2CEScorer.pretrained(model)
        whole = I2CEScorer.pretrained(model, sentences=WHOLE).score(pairs.gts, pairs.res)
        value, low, high = accuracy(whole.scores, pairs.images)
        rows.append({"model": model, "way": WHOLE, "aggregation": "-", "weighting": "-",
                     "beta": "-", "accuracy": value, "ci_low": low, "ci_high": high})  # fmt: skip
        plan = SentencePlan.of(pairs.gts, pairs.res, SENTENCES)
        strings: list = []
        names: list[str] = []
        aligned = plan.rows(strings, names)
        embedded = scorer._embed(strings, names)
        order = [aligned.keys.index(k) for k in keys]
        for aggregation, weighting, beta in itertools.product(AGGREGATIONS, WEIGHTINGS, BETAS):
            scorer.aggregation, scorer.weighting = aggregation, weighting
            scorer.beta = 1.0 if beta == "recall" else beta
            result = scorer.align(aligned, embedded)
            scores = result.scores
            if beta == "recall":
                scores = pool_similarities(
                    np.nan_to_num(result.recall), result.mask, mode=scorer.pooling
                )
            value, low, high = accuracy(np.asarray(scores)[order], pairs.images)
            rows.append({"model": model, "way": SENTENCES, "aggregation": aggregation,
                         "weighting": weighting, "beta": beta, "accuracy": value,
                         "ci_low": low, "ci_high": high})  # fmt: skip
    return rows


def sweep_table(rows: list[dict]) -> str:
    header = ["model", "way", "aggregation", "weighting", "F-beta", "accuracy [95%]"]
    cells = [
        [r["model"], r["way"], r["aggregation"], r["weighting"], str(r["beta"]),
         f"{r['accuracy']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}]"]
        for r in rows
    ]  # fmt: skip
    return format_cells(header, cells)


def i2ce_columns(models: tuple[str, ...], ways: tuple[str, ...]) -> dict:
    """``metaeval.run``'s scorers: I2CE of each model, each way (auto: the default)."""
    return {
        f"I2CE {model} ({way})": (
            lambda model=model, way=way: I2CEScorer.pretrained(model, sentences=way).compute_score
        )
        for model in models
        for way in ways
    }


def report(path: Path, bootstrap: int, out_dir: Path) -> dict:
    """capsim.metaeval on the pairs file: the built-in metrics and I2CE of both models,
    by sentences (``auto``: every paragraph goes by sentences) and whole."""
    out = out_dir / "long_pairs_report.json"
    args = metaeval_args(f"pairs:{path}", out, bootstrap, None)
    metaeval.run(args, i2ce_columns(MODELS, ("auto", WHOLE)))
    return json.loads(out.read_text())


def expert(out_dir: Path) -> dict:
    """Flickr8k-Expert τc of ``base``, auto against whole, and the captions that moved."""
    from capsim.eval.judgment_harness import score_set
    from capsim.eval.judgment_sets import load_set

    folder = SHARED_DATA / "flickr8k"
    out = out_dir / "expert_report.json"
    names = "I2CE base (auto),I2CE base (whole)"
    args = metaeval_args(f"flickr8k_expert:{folder}", out, 0, names)
    metaeval.run(args, i2ce_columns(("base",), ("auto", WHOLE)))
    result = json.loads(out.read_text())
    pairs = score_set("flickr8k_expert", load_set("flickr8k_expert", folder), builtin=()).pairs
    auto = I2CEScorer.pretrained().score(pairs.gts, pairs.res)
    whole = I2CEScorer.pretrained(sentences=WHOLE).score(pairs.gts, pairs.res)
    moved = np.array([w == SENTENCES for w in auto.ways])
    return {
        "report": result,
        "candidates": len(auto.ways),
        "by_sentences": int(moved.sum()),
        "max_abs_change_whole_way": float(np.abs(auto.scores - whole.scores)[~moved].max()),
        "bit_for_bit_whole_way": bool((auto.scores == whole.scores)[~moved].all()),
    }


def _value(cell: float | dict) -> float:
    """A statistic's value, with or without its bootstrap interval."""
    return cell["value"] if isinstance(cell, dict) else cell


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="sweep,report,swap,expert")
    parser.add_argument("--seed", type=int, default=0, help="the pair set's seed")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    parts = args.only.split(",")
    seeded = "" if args.seed == 0 else f"_seed{args.seed}"  # seed 0 keeps its sections
    with tempfile.TemporaryDirectory() as tmp:
        tmp_dir = Path(tmp)
        path = tmp_dir / "long_pairs.jsonl"
        rows = long_caption_pairs.generate(long_caption_pairs.dev_images(SHARED_DATA), args.seed)
        long_caption_pairs.write_pairs(rows, path)
        words = [len(r["better"].split()) for r in rows]
        facts = (
            f"{len(rows)} pairs (seed {args.seed}), candidates of {min(words)}-{max(words)} "
            f"words (mean {np.mean(words):.0f}); load {load_average():.2f}"
        )
        print(facts)
        if "sweep" in parts:
            found = sweep(path)
            text = sweep_table(found)
            print(text)
            if args.write:
                record_results(
                    "long_captions", found, SECTION, f"{facts}\n\n{text}", "settings" + seeded
                )
        if "report" in parts:
            result = report(path, args.bootstrap, tmp_dir)
            text = report_table(result)
            print(text)
            if args.write:
                record_results(
                    "long_captions", result, SECTION, f"{facts}\n\n{text}", "pairs" + seeded
                )
        if "swap" in parts:
            swap_path = tmp_dir / "swap_pairs.jsonl"
            lengths = write_long_pairs(swap_path, 500)
            swap_dir = tmp_dir / "swap"
            swap_dir.mkdir()
            result = report(swap_path, args.bootstrap, swap_dir)
            text = (
                f"bench/quality/metaeval_report.py's 500 pairs (seed 0), paragraphs of "
                f"{lengths['mean']:.0f} words [{lengths['min']}, {lengths['max']}]\n\n"
                + report_table(result)
            )
            print(text)
            if args.write:
                record_results("long_captions", result, SECTION, text, "swap" + seeded)
        if "expert" in parts:
            found = expert(tmp_dir)
            measured = found["report"]["sets"]["flickr8k_expert"]["metrics"]
            taus = {m: _value(v["tau_c"]) for m, v in measured.items()}
            text = (
                f"Flickr8k-Expert, {found['candidates']} candidates, {found['by_sentences']} "
                f"of them by sentences under auto; τc: "
                + ", ".join(f"{m} {t:.2f}" for m, t in taus.items())
                + f"; the others bit for bit: {found['bit_for_bit_whole_way']} (largest change "
                f"{found['max_abs_change_whole_way']:.3g})"
            )
            print(text)
            if args.write:
                record_results("long_captions", found, SECTION, text, "expert" + seeded)


if __name__ == "__main__":
    main()
