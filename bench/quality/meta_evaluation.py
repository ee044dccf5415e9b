"""Metric comparisons on Flickr8k-Expert with their uncertainty, and the bootstrap's cost.

    python bench/quality/meta_evaluation.py [--resamples 1000] [--rounds 3] [--seed 0]
        [--no-models] [--no-minilm] [--write]

Scores the Flickr8k-Expert pairs once with every built-in metric (BLEU-1..4,
ROUGE-L, CIDEr-D, METEOR), the three packaged I2CE models and, where the bench
extra is installed, all-MiniLM-L6-v2 top-3 (plugged in as a user's metric would
be: ``bench.minilm:MiniLMScorer``). Then ``set_report`` with ``--resamples``
bootstrap resamples of the 1,000 images is timed ``--rounds`` times, once for the
built-in metrics (the issue's speed row) and once for all of them.

Prints three tables: the cost (scoring seconds, bootstrap seconds median [min,
max], their ratio, load average), τc × 100 with its 95% interval per metric, and
the paired differences the project's claims rest on. ``--write`` records them in
bench/results/meta_evaluation.json and bench/RESULTS.md ("Metric comparisons with
intervals").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import statistics
import time

from bench import minilm
from bench.harness import SHARED_DATA, load_average, record_results
from capsim.eval import judgment_harness as harness
from capsim.eval.judgment_sets import load_set
from capsim.eval.metaeval_output import verdict
from capsim.eval.plugged_metrics import plugged_metric
from capsim.tables import format_table
from i2ce_jax import pretrained
from i2ce_jax.scorer import I2CEScorer

SECTION = "## Metric comparisons with intervals"
SET = "flickr8k_expert"
# (metric, other): the differences that README, model card and RESULTS state.
CLAIMS = (
    ("I2CE-research", "MiniLM"),
    ("I2CE-base", "MiniLM"),
    ("I2CE-large", "I2CE-base"),
    ("I2CE-research", "I2CE-base"),
    ("I2CE-base", "CIDEr"),
    ("CIDEr", "METEOR"),
    ("METEOR", "ROUGE-L"),
    ("BLEU-4", "ROUGE-L"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-models", action="store_true", help="built-in metrics only")
    parser.add_argument("--no-minilm", action="store_true")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    judgments = load_set(SET, SHARED_DATA / "flickr8k")
    scorers = {}
    if not args.no_models:
        for name in pretrained.NAMES:
            scorers[f"I2CE-{name}"] = I2CEScorer.pretrained(name).compute_score
    if not args.no_minilm and not args.no_models and minilm.available():
        scorers["MiniLM"] = plugged_metric("MiniLM", "bench.minilm:MiniLMScorer")
    began = time.perf_counter()
    builtin_only = harness.score_set(SET, judgments)
    builtin_seconds = time.perf_counter() - began
    began = time.perf_counter()
    scored = harness.score_set(SET, judgments, scorers)
    all_seconds = time.perf_counter() - began
    harness.set_report(builtin_only, 2, args.seed)  # compiles the numba kernels off the clock

    load_before = load_average()
    runs = {}
    for label, subject, scoring in (
        ("built-in metrics", builtin_only, builtin_seconds),
        ("all metrics", scored, all_seconds),
    ):
        seconds = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            report, comparisons = harness.set_report(subject, args.resamples, args.seed)
            seconds.append(time.perf_counter() - began)
        runs[label] = {
            "metrics": len(subject.scores),
            "scoring_s": round(scoring, 2),
            "bootstrap_s": round(statistics.median(seconds), 2),
            "bootstrap_min_s": round(min(seconds), 2),
            "bootstrap_max_s": round(max(seconds), 2),
        }
    load_after = load_average()

    cost_rows = [
        {
            "metrics": f"{label} ({run['metrics']})",
            "resamples": args.resamples,
            "scoring s": f"{run['scoring_s']:.1f}",
            "bootstrap s, median [min, max]": (
                f"{run['bootstrap_s']:.2f} [{run['bootstrap_min_s']:.2f}, "
                f"{run['bootstrap_max_s']:.2f}]"
            ),
            "bootstrap / scoring": f"{run['bootstrap_s'] / run['scoring_s']:.2f}",
        }
        for label, run in runs.items()
    ]
    tau_rows = [
        {
            "metric": metric,
            "τc": f"{values['tau_c']['value']:.2f}",
            "95% interval": f"[{values['tau_c']['ci_low']:.2f}, {values['tau_c']['ci_high']:.2f}]",
            "τb": f"{values['tau_b']['value']:.2f}",
            "Spearman": f"{values['spearman']['value']:.2f}",
            "Pearson": f"{values['pearson']['value']:.2f}",
        }
        for metric, values in report.items()
    ]
    claim_rows = []
    for metric, other in CLAIMS:
        if metric in comparisons and other in comparisons[metric]:
            entry = comparisons[metric][other]
            claim_rows.append(
                {
                    "difference": f"{metric} − {other}",
                    "Δτc": f"{entry['delta']:+.2f}",
                    "95% interval": f"[{entry['ci_low']:+.2f}, {entry['ci_high']:+.2f}]",
                    "p (paired bootstrap)": f"{entry['p_value']:.3f}",
                    "p (Williams, Pearson)": f"{entry['p_value_williams']:.3f}",
                    "reading": verdict(entry),
                }
            )
    text = "\n\n".join(
        [
            f"Flickr8k-Expert, {len(judgments)} ratings of {len(scored.pairs.keys)} pairs on "
            f"1,000 images; {args.resamples} resamples of the images (seed {args.seed}); "
            f"{args.rounds} rounds; load {load_before:.2f} before, {load_after:.2f} after.",
            format_table(cost_rows, list(cost_rows[0])),
            format_table(tau_rows, list(tau_rows[0])),
            format_table(claim_rows, list(claim_rows[0])) if claim_rows else "",
        ]
    )
    print(text)
    if args.write:
        record_results(
            "meta_evaluation",
            [{"cost": runs, "report": report, "comparisons": comparisons}],
            SECTION,
            text,
        )


if __name__ == "__main__":
    main()
