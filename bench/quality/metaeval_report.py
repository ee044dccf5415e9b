"""The meta-evaluation report's cost, as users run it, and a long-caption pair set.

    python bench/quality/metaeval_report.py [--rounds 3] [--resamples 1000] [--permutations 1000]
        [--pairs 500] [--write]

1. Flickr8k-Expert, the whole report from a cold process: ``python -m i2ce_jax.evaluate``
   with the built-in metrics and I2CE, ``--resamples`` bootstrap resamples of the images,
   PERM-BOTH with ``--permutations`` resamples between every pair of metrics, and the
   clusters; against the same command with neither (the scoring alone). Rounds alternate
   the two. The goal: the statistics add at most 2x the scoring time.
2. A long-caption pair set, generated from COCO val2017's captions: each "document" joins
   one caption of each of 20 images (about 200 words); its references are four such
   paragraphs, ``better`` the fifth, ``worse`` the fifth with a quarter ("swap-1/4") or a
   half ("swap-1/2") of its sentences taken from another document. ``--pairs`` pairs,
   scored and judged with intervals from a cold process; and the n-gram metrics of the
   report against the COCOEvalCap drop-in on the same paragraphs, in alternating rounds
   (the paragraph speed the report must keep).

Prints the tables; ``--write`` records them in bench/results/metaeval_report.json and
bench/RESULTS.md ("Meta-evaluation report (issue 54)").
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import statistics
import subprocess
import tempfile
import time

from bench.harness import SHARED_DATA, load_average, ratio_summary, record_results, time_rounds
from bench.quality.swap_pairs import CATEGORIES, write_long_pairs
from capsim.data.judgment_files import read_caption_pairs
from capsim.eval.judgment_harness import ngram_metric_scores, score_set
from capsim.metrics.caption_files import CaptionFile
from capsim.metrics.cocoeval import COCOEvalCap
from capsim.tables import format_table

SECTION = "## Meta-evaluation report (issue 54)"


def _report(judgments: str, out: Path, resamples: int, permutations: int) -> dict:
    """One cold process of the I2CE face; its wall seconds and its JSON."""
    command = [
        sys.executable,
        "-m",
        "i2ce_jax.evaluate",
        "--judgments",
        judgments,
        "--bootstrap",
        str(resamples),
        "--permutations",
        str(permutations),
        "--out",
        str(out),
    ]
    began = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - began
    return {"wall": wall, **json.loads(out.read_text())}


def _median_range(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} [{min(values):.1f}, {max(values):.1f}]"


def expert_cost(args, folder: Path) -> tuple[list[dict], dict]:
    """(the cost table's rows, the last full report)."""
    spec = f"flickr8k_expert:{SHARED_DATA / 'flickr8k'}"
    runs: dict[str, list[dict]] = {"report": [], "scoring alone": []}
    settings = {"report": (args.resamples, args.permutations), "scoring alone": (0, 0)}
    for index in range(args.rounds):
        order = list(runs) if index % 2 == 0 else list(runs)[::-1]
        for name in order:
            result = _report(spec, folder / f"{index}-{len(runs[name])}.json", *settings[name])
            runs[name].append(result)
    rows = []
    for name, results in runs.items():
        seconds = [r["sets"]["flickr8k_expert"]["seconds"] for r in results]
        rows.append(
            {
                "command": name,
                "bootstrap, PERM-BOTH": "{}, {}".format(*settings[name]),
                "wall s, median [min, max]": _median_range([r["wall"] for r in results]),
                "scoring s (in the process)": _median_range([s["scoring"] for s in seconds]),
                "statistics s (in the process)": _median_range([s["statistics"] for s in seconds]),
            }
        )
    full = [r["wall"] for r in runs["report"]]
    alone = [r["wall"] for r in runs["scoring alone"]]
    added = [(f - a) / a for f, a in zip(full, alone, strict=True)]
    rows.append(
        {
            "command": "statistics added / scoring alone (cold processes, per round)",
            "bootstrap, PERM-BOTH": "",
            "wall s, median [min, max]": f"{statistics.median(added):.2f} "
            f"[{min(added):.2f}, {max(added):.2f}]",
            "scoring s (in the process)": "",
            "statistics s (in the process)": "",
        }
    )
    return rows, runs["report"][-1]


def metric_table(report: dict, name: str, statistic: str) -> list[dict]:
    """Per metric: cluster (PERM-BOTH), the statistic with its interval, and the rest."""
    entry = report["sets"][name]
    clusters = entry["clusters"]["perm_both"]
    rows = []
    for metric in sorted(entry["metrics"], key=lambda m: clusters.get(m, 99)):
        values = entry["metrics"][metric]
        cell = values[statistic]
        row = {
            "metric": metric,
            "cluster": clusters.get(metric, "-"),
            statistic: f"{cell['value']:.2f} [{cell['ci_low']:.2f}, {cell['ci_high']:.2f}]",
        }
        if f"{statistic}_item_grouped" in values:
            row[f"{statistic}, item-grouped"] = f"{values[f'{statistic}_item_grouped']:.2f}"
            row["pairwise acc."] = f"{values['pairwise_accuracy']:.2f}"
            row["acc_eq (ε)"] = f"{values['acc_eq']:.2f} ({values['acc_eq_epsilon']:.3g})"
        else:
            row.update({c: f"{values[c]['value']:.2f}" for c in CATEGORIES if c in values})
        rows.append(row)
    return rows


def paragraph_speed(path: Path, rounds: int) -> dict:
    """The report's n-gram metrics against COCOEvalCap.evaluate() on the same paragraphs."""
    scored = score_set("pairs", read_caption_pairs(path), builtin=())
    gts, res = scored.pairs.gts, scored.pairs.res
    ids = list(res)
    coco = CaptionFile([{"image_id": i, "caption": c} for i in ids for c in gts[i]])
    results = CaptionFile([{"image_id": i, "caption": res[i][0]} for i in ids])

    def drop_in(_: int) -> None:
        evaluator = COCOEvalCap(coco, results)
        evaluator.evaluate(verbose=False)

    drop_in(0)  # compiled and cached off the clock, for both sides
    seconds = time_rounds(
        {"report's metrics": lambda _: ngram_metric_scores(scored.pairs), "COCOEvalCap": drop_in},
        rounds,
    )
    return {
        "seconds": seconds,
        **ratio_summary(seconds["report's metrics"], seconds["COCOEvalCap"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=500)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    load_before = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cost_rows, expert = expert_cost(args, folder)
        pair_file = folder / "long_pairs.jsonl"
        lengths = write_long_pairs(pair_file, args.pairs)
        long = _report(
            f"pairs:{pair_file}", folder / "long.json", args.resamples, args.permutations
        )
        speed = paragraph_speed(pair_file, args.rounds)
    load_after = load_average()
    long_seconds = long["sets"]["pairs"]["seconds"]
    long_rows = [
        {
            "pairs": args.pairs,
            "words a paragraph, mean [min, max]": f"{lengths['mean']:.0f} [{lengths['min']}, {lengths['max']}]",
            "wall s (cold process)": f"{long['wall']:.1f}",
            "scoring s": f"{long_seconds['scoring']:.1f}",
            "statistics s": f"{long_seconds['statistics']:.1f}",
            "COCOEvalCap s / report's n-gram metrics s, median [min, max]": (
                f"{speed['ratio_median']:.2f} [{speed['ratio_min']:.2f}, {speed['ratio_max']:.2f}]"
            ),
        }
    ]
    text = "\n\n".join(
        [
            f"{args.rounds} rounds, alternating; load {load_before:.2f} before, "
            f"{load_after:.2f} after. Flickr8k-Expert: {expert['sets']['flickr8k_expert']['judgments']} "
            f"ratings, the built-in metrics and I2CE (base), {args.resamples} bootstrap resamples "
            f"of the images, PERM-BOTH with k = {args.permutations} (block {args.permutations}: "
            "no early stop) between all pairs of metrics, swapping whole images.",
            format_table(cost_rows, list(cost_rows[0])),
            "The metrics on Flickr8k-Expert, by significance cluster (PERM-BOTH, p <= 0.05); "
            "τc × 100 with its 95% bootstrap interval over images:",
            format_table(*_with_columns(metric_table(expert, "flickr8k_expert", "tau_c"))),
            f"Generated long-caption pair set ({args.pairs} pairs):",
            format_table(long_rows, list(long_rows[0])),
            "Share × 100 of pairs where the metric scores the better paragraph higher "
            "(a tie is wrong), 95% interval over documents:",
            format_table(*_with_columns(metric_table(long, "pairs", "accuracy"))),
        ]
    )
    print(text)
    if args.write:
        record_results(
            "metaeval_report",
            [
                {
                    "expert_cost": cost_rows,
                    "expert": expert["sets"]["flickr8k_expert"],
                    "long_pairs": long["sets"]["pairs"],
                    "paragraph_speed": speed,
                    "load": [load_before, load_after],
                }
            ],
            SECTION,
            text,
        )


def _with_columns(rows: list[dict]) -> tuple[list[dict], list[str]]:
    return rows, list(rows[0])


if __name__ == "__main__":
    main()
