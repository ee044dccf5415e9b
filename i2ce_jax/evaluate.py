"""I2CE and any caption metric against human judgments, with intervals and paired tests.

    python -m i2ce_jax.evaluate --judgments NAME:PATH[,NAME:PATH...]
        [--model base|large|research | --checkpoint W] [--references NAME=FILE]
        [--metric NAME=MODULE:ATTR ...] [--scores NAME=FILE ...] [--metrics a,b,...]
        [--bootstrap N --seed S --baseline NAME] [--out evaluation.json]

``--help`` lists the sets, what PATH is for each (the files as their authors
publish them), the statistic that heads each set's table and the row ids of
``--scores`` files, all from ``capsim.eval.judgment_sets.JUDGMENT_SETS``. Absolute
sets report Kendall τc and τb, Spearman and Pearson over rating rows, the set's own
statistic first (sets that name their captioning systems, as THumB does, add
system-level agreement); PASCAL-50S reports the accuracy at picking the candidate the
human majority preferred, per category (HC/HI/HM/MM) and their mean.

The metrics: BLEU-1..4, ROUGE-L, CIDEr-D and METEOR (capsim's, no Java; its data
files come with pycocoevalcap, and it is reported as missing without them), I2CE,
each ``--metric NAME=MODULE:ATTR`` (an object with pycocoevalcap's
``compute_score(gts, res)`` on raw captions, or a class or zero-argument function
returning one) and each ``--scores NAME=FILE`` (a JSON object: row id -> score, or
set name -> that object when several sets are given). ``--metrics`` chooses and
orders them.

``--bootstrap N`` resamples the images N times (PASCAL-50S: its pairs, within each
category; seeded by ``--seed``): every statistic gets its 95% interval, and every pair
of metrics a paired difference on the set's statistic with its interval and
paired-bootstrap p-value (plus Williams' test of the Pearson difference on absolute
sets). The screen compares each metric with ``--baseline`` (default: the first
metric); a difference whose interval holds 0 is "level with".

``--references NAME=FILE`` gives a set its references: a JSON object (image id
-> list of captions, as for i2ce_jax.score) or a Flickr8k token file. Flickr8k
candidates that are one of their image's references are skipped (CLIPScore
protocol). Each statistic is × 100. A table is printed per set and everything is
written to ``--out`` (replaced atomically).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from capsim.cli import run_command
from capsim.data.captions import read_json_file
from capsim.errors import DataFormatError
from capsim.eval.judgment_harness import NGRAM_METRICS, score_set, set_report
from capsim.eval.judgment_sets import JUDGMENT_SETS, PUBLISHED_SETS, judgment_set, load_set
from capsim.eval.plugged_metrics import plugged_metric
from capsim.tables import format_table
from i2ce_jax import pretrained
from i2ce_jax.score import write_atomically
from i2ce_jax.scorer import I2CEScorer


def _cell(value) -> str:
    if isinstance(value, dict):
        return f"{value['value']:.2f} [{value['ci_low']:.2f}, {value['ci_high']:.2f}]"
    return f"{value:.2f}"


def _table(report: Mapping[str, dict]) -> str:
    columns = list(next(iter(report.values())))
    rows = [
        {"metric": metric, **{c: _cell(v) for c, v in values.items()}}
        for metric, values in report.items()
    ]
    return format_table(rows, ["metric", *columns])


def verdict(entry: Mapping[str, float]) -> str:
    """ "above", "below" or, when the interval of the difference holds 0, "level with"."""
    if entry["ci_low"] <= 0 <= entry["ci_high"]:
        return "level with"
    return "above" if entry["delta"] > 0 else "below"


def _comparison_table(comparisons: Mapping[str, dict], baseline: str, statistic: str) -> str:
    rows = []
    for metric, others in comparisons.items():
        if metric == baseline:
            continue
        entry = others[baseline]
        rows.append(
            {
                "metric": metric,
                f"Δ{statistic}": f"{entry['delta']:+.2f}",
                "95% interval": f"[{entry['ci_low']:+.2f}, {entry['ci_high']:+.2f}]",
                "p": f"{entry['p_value']:.3f}",
                "p (Williams)": (
                    f"{entry['p_value_williams']:.3f}" if "p_value_williams" in entry else "-"
                ),
                "reading": f"{verdict(entry)} {baseline}",
            }
        )
    return format_table(rows, list(rows[0]))


def _finite_or_none(value):
    """NaN (e.g. a correlation with a constant metric) becomes null, so the file stays JSON."""
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def sets_help() -> str:
    """The published sets: name, what its PATH is, its statistic, its row ids."""
    sets = [JUDGMENT_SETS[name] for name in PUBLISHED_SETS]
    name_width = max(len(s.name) for s in sets)
    path_width = max(len(s.path) for s in sets)
    lines = [f"  {s.name:<{name_width}}  {s.path:<{path_width}}  {s.statistic}" for s in sets]
    ids = [f"  {s.name:<{name_width}}  {s.row_ids}" for s in sets]
    return (
        "sets, what PATH is and their statistic:\n"
        + "\n".join(lines)
        + "\n\nrow ids (the keys of --scores files):\n"
        + "\n".join(ids)
    )


def parse_specs(text: str) -> list[tuple[str, Path]]:
    """``NAME:PATH[,NAME:PATH...]`` as (name, path) pairs, each name a published set."""
    specs = []
    for item in filter(None, text.split(",")):
        name, sep, path = item.partition(":")
        if not sep or name not in PUBLISHED_SETS:
            raise ValueError(
                f"--judgments wants NAME:PATH with NAME in {list(PUBLISHED_SETS)}, got {item!r}"
            )
        specs.append((name, Path(path)))
    return specs


def _named(values: list[str], flag: str) -> dict[str, str]:
    """``NAME=VALUE`` items as a dict; a missing ``=`` or a repeated name is an error."""
    named: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{flag} wants NAME=VALUE, got {item!r}")
        if name in named:
            raise ValueError(f"{flag}: {name!r} is given twice")
        named[name] = value
    return named


def _score_files(files: Mapping[str, str], sets: list[str]) -> dict[str, dict[str, dict]]:
    """set -> metric -> (row id -> score), from ``--scores`` files."""
    by_set: dict[str, dict[str, dict]] = {name: {} for name in sets}
    for metric, path in files.items():
        data = read_json_file(path)
        if not isinstance(data, dict):
            raise DataFormatError(path, f"--scores {metric}: expected a JSON object")
        nested = bool(data) and set(data) <= set(JUDGMENT_SETS)
        if nested:
            for name in sets:
                if not isinstance(data.get(name), dict):
                    raise DataFormatError(path, f"--scores {metric}: no object for set {name!r}")
                by_set[name][metric] = data[name]
        elif len(sets) == 1:
            by_set[sets[0]][metric] = data
        else:
            raise DataFormatError(
                path,
                f"--scores {metric}: with several sets ({', '.join(sets)}) the file maps "
                "each set name to its scores",
            )
    return by_set


def _chosen(text: str | None, known: list[str]) -> list[str]:
    if not text:
        return known
    chosen = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in known]
    if unknown:
        raise ValueError(f"--metrics: unknown {unknown}; known: {', '.join(known)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=sets_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--judgments", required=True, help="NAME:PATH[,NAME:PATH...]")
    parser.add_argument(
        "--model",
        default=pretrained.DEFAULT,
        choices=pretrained.NAMES,
        help="packaged model (research: non-commercial terms, see its MODEL_CARD.md)",
    )
    parser.add_argument("--checkpoint", default=None, help="an I2CE training workdir instead")
    parser.add_argument("--references", action="append", default=[], metavar="NAME=FILE")
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="NAME=MODULE:ATTR",
        help="a metric with compute_score(gts, res) on raw captions (repeatable)",
    )
    parser.add_argument(
        "--scores",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="precomputed scores, a JSON object keyed by the set's row ids (repeatable)",
    )
    parser.add_argument("--metrics", default=None, help="the metrics to run, in order: a,b,...")
    parser.add_argument("--no_meteor", action="store_true", help="skip METEOR")
    parser.add_argument("--bootstrap", type=int, default=0, metavar="N", help="resamples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", default=None, help="the metric the others are compared to")
    parser.add_argument("--out", default="i2ce_evaluation.json")
    args = parser.parse_args(argv)
    if args.bootstrap < 0:
        raise ValueError(f"--bootstrap must be >= 0, got {args.bootstrap}")
    specs = parse_specs(args.judgments)
    references = {k: Path(v) for k, v in _named(args.references, "--references").items()}
    plugins = _named(args.metric, "--metric")
    files = _named(args.scores, "--scores")
    builtin = [m for m in NGRAM_METRICS if not (args.no_meteor and m == "METEOR")]
    known = [*builtin, "I2CE", *plugins, *files]
    reserved = {*NGRAM_METRICS, "I2CE"}
    clash = sorted(reserved & (set(plugins) | set(files)) | set(plugins) & set(files))
    if clash:
        raise ValueError(f"metric names {clash} are taken: choose other names")
    chosen = _chosen(args.metrics, known)
    baseline = args.baseline or chosen[0]
    if baseline not in chosen:
        raise ValueError(f"--baseline {baseline!r} is not among the metrics: {', '.join(chosen)}")
    scorers = {name: plugged_metric(name, spec) for name, spec in plugins.items() if name in chosen}
    if "I2CE" in chosen:
        scorer = (
            I2CEScorer.from_checkpoint(args.checkpoint)
            if args.checkpoint
            else I2CEScorer.pretrained(args.model)
        )
        scorers = {"I2CE": scorer.compute_score, **scorers}
    given = _score_files({m: f for m, f in files.items() if m in chosen}, [n for n, _ in specs])
    loaded = {name: load_set(name, path, references.get(name)) for name, path in specs}
    results: dict = {"model": args.checkpoint or args.model, "sets": {}}
    if args.bootstrap:
        results["bootstrap"] = {
            "resamples": args.bootstrap,
            "seed": args.seed,
            "confidence": 0.95,
            "baseline": baseline,
        }
    for name, judgments in loaded.items():
        scored = score_set(
            name, judgments, scorers, given[name], [m for m in builtin if m in chosen]
        )
        scored.scores = {m: scored.scores[m] for m in chosen if m in scored.scores}
        report, comparisons = set_report(scored, args.bootstrap, args.seed)
        results["sets"][name] = {
            "judgments": len(judgments),
            "metrics": report,
            "skipped": scored.skipped,
        }
        print(f"\n{name}: {len(judgments)} judgments", flush=True)
        print(_table(report))
        if comparisons:
            results["sets"][name]["comparisons"] = comparisons
            if baseline in comparisons and len(comparisons) > 1:
                print(f"\nagainst {baseline} (paired bootstrap over images):")
                print(_comparison_table(comparisons, baseline, judgment_set(name).statistic))
        for metric, reason in scored.skipped.items():
            print(f"  {metric}: not reported ({reason})")
    write_atomically(Path(args.out), _finite_or_none(results))
    print(f"\nwrote {args.out}", file=sys.stderr)
    return 0


def cli() -> None:
    run_command(main, "i2ce_jax.evaluate")


if __name__ == "__main__":
    cli()
