"""Any caption metric judged against human judgments, to the MT field's standard.

    python -m capsim.metaeval --judgments NAME:PATH[,NAME:PATH...]
        [--metric NAME=MODULE:ATTR ...] [--scores NAME=FILE ...] [--metrics a,b,...]
        [--references NAME=FILE] [--bootstrap N] [--permutations K --block_size B]
        [--alpha A] [--seed S] [--baseline NAME] [--out metaeval.json] [--csv F]

``--help`` lists the sets, what PATH is for each (the files as their authors or recent
metric papers ship them; ``pairs:FILE`` and ``csv:FILE`` are a user's own pairwise and
absolute sets), the statistic that heads each set's table and the row ids of
``--scores`` files, all from ``capsim.eval.judgment_sets.JUDGMENT_SETS``.

The metrics: BLEU-1..4, ROUGE-L, CIDEr-D and METEOR (capsim's, no Java), each
``--metric NAME=MODULE:ATTR`` (an object with pycocoevalcap's ``compute_score(gts,
res)`` on raw captions, or a class or zero-argument function returning one) and each
``--scores NAME=FILE`` (a JSON object: row id -> score, or set name -> that object
when several sets are given). ``--metrics`` chooses and orders them.

Absolute sets report Kendall τc and τb, Spearman and Pearson over rating rows (the
set's own statistic first), system-level agreement where the set names 3 or more
systems, the set's statistic item-grouped (within each image, averaged), and pairwise
accuracy over candidates of the same image with and without tie calibration (acc_eq
and its ε). PASCAL-50S reports its accuracy per category and their mean; a pair set,
the share of pairs whose better caption the metric scores higher.

Every pair of metrics gets PERM-BOTH's one-sided p-value (``--permutations`` K,
default 1,000, early stops at ``--block_size`` boundaries; images are swapped whole),
``perm_both_p`` in the JSON, and the metrics are ranked into significance clusters at
``--alpha``. ``--bootstrap N`` adds 95% intervals over images and paired bootstrap
(and Williams) tests, and their clusters. Each statistic is × 100. A table is printed
per set; the JSON (``--out``, replaced atomically) holds every figure, and the CSV
(``--csv``, default beside it) one row per metric and set.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from capsim.data.captions import read_json_file, write_json_atomically
from capsim.errors import CapsimError, DataFormatError
from capsim.eval import significance
from capsim.eval.judgment_harness import score_set, set_report
from capsim.eval.judgment_sets import (
    JUDGMENT_SETS,
    PUBLISHED_SETS,
    judgment_set,
    load_set,
    pascal50s_labels,
)
from capsim.eval.plugged_metrics import ComputeScore, plugged_metric
from capsim.eval.set_significance import set_significance
from capsim.metrics.coco_metrics import BUILTIN_METRIC_NAMES
from capsim.tables import format_table

CLUSTER_TEST = "perm_both"  # the clusters shown on screen and in the CSV


def _cell(value) -> str:
    if isinstance(value, dict):
        return f"{value['value']:.2f} [{value['ci_low']:.2f}, {value['ci_high']:.2f}]"
    return f"{value:.3g}" if isinstance(value, float) and abs(value) < 1 else f"{value:.2f}"


def _table(report: Mapping[str, dict], clusters: Mapping[str, int]) -> str:
    columns = list(next(iter(report.values())))
    rows = [
        {
            "metric": metric,
            **({"cluster": clusters.get(metric, "-")} if clusters else {}),
            **{c: _cell(v) for c, v in values.items()},
        }
        for metric, values in report.items()
    ]
    return format_table(rows, ["metric", *(["cluster"] if clusters else []), *columns])


def verdict(entry: Mapping[str, float]) -> str:
    """ "above", "below" or, when the interval of the difference holds 0, "level with", of a
    comparison of the JSON report (``delta``, ``ci_low``, ``ci_high``).

    >>> verdict({"delta": 0.4, "ci_low": -0.2, "ci_high": 1.1})
    'level with'
    >>> verdict({"delta": 9.2, "ci_low": 7.9, "ci_high": 10.6})
    'above'
    """
    if entry["ci_low"] <= 0 <= entry["ci_high"]:
        return "level with"
    return "above" if entry["delta"] > 0 else "below"


def _comparison_table(comparisons: Mapping[str, dict], baseline: str, statistic: str) -> str:
    rows = []
    for metric, others in comparisons.items():
        if metric == baseline or baseline not in others:
            continue
        entry = others[baseline]
        has_interval = "ci_low" in entry

        def shown(key: str, entry=entry) -> str:
            return f"{entry[key]:.3f}" if key in entry else "-"

        rows.append(
            {
                "metric": metric,
                f"Δ{statistic}": f"{entry['delta']:+.2f}",
                "95% interval": (
                    f"[{entry['ci_low']:+.2f}, {entry['ci_high']:+.2f}]" if has_interval else "-"
                ),
                "p (bootstrap)": shown("p_value"),
                "p (Williams)": shown("p_value_williams"),
                "p (PERM-BOTH, better)": shown("perm_both_p"),
                "reading": f"{verdict(entry)} {baseline}" if has_interval else "-",
            }
        )
    return format_table(rows, list(rows[0])) if rows else ""


def _finite_or_none(value):
    """NaN (e.g. a correlation with a constant metric) becomes null, so the file stays JSON."""
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def sets_help() -> str:
    """The published sets: name, what its PATH is, its statistic, its row ids (the text that
    ends ``--help``)."""
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
    """``--judgments NAME:PATH[,NAME:PATH...]`` as (name, path) pairs, in order; a
    ValueError when an item is not ``NAME:PATH`` or names no published set.

    >>> parse_specs("flickr8k_expert:data/flickr8k,pairs:long_pairs.jsonl")
    [('flickr8k_expert', PosixPath('data/flickr8k')), ('pairs', PosixPath('long_pairs.jsonl'))]
    """
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
        if bool(data) and set(data) <= set(JUDGMENT_SETS):
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


def _csv_rows(results: Mapping[str, dict]) -> str:
    """One row per metric and set: the set's statistic with its interval and cluster."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["set", "metric", "statistic", "value", "ci_low", "ci_high", "cluster"])
    for name, entry in results.items():
        statistic = judgment_set(name).statistic
        clusters = entry.get("clusters", {}).get(CLUSTER_TEST, {})
        for metric, values in entry["metrics"].items():
            value = values[statistic]
            low, high = (value["ci_low"], value["ci_high"]) if isinstance(value, dict) else ("", "")
            value = value["value"] if isinstance(value, dict) else value
            writer.writerow([name, metric, statistic, value, low, high, clusters.get(metric, "")])
    return out.getvalue()


def parser(description: str | None = None, epilog: str | None = None) -> argparse.ArgumentParser:
    """The command's ``argparse`` parser; a face such as i2ce_jax.evaluate adds its own
    arguments. ``description`` and ``epilog`` (the text above and below the options)
    default to the module docstring's first paragraph and :func:`sets_help`."""
    parser = argparse.ArgumentParser(
        description=description or __doc__.split("\n\n")[0],
        epilog=epilog or sets_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--judgments", required=True, help="NAME:PATH[,NAME:PATH...]")
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
    parser.add_argument(
        "--permutations",
        type=int,
        default=significance.PERM_BOTH_RESAMPLES,
        metavar="K",
        help="PERM-BOTH resamples between each pair of metrics (0: none)",
    )
    parser.add_argument(
        "--block_size",
        type=int,
        default=significance.PERM_BOTH_BLOCK,
        help="PERM-BOTH checks its early stop every this many resamples",
    )
    parser.add_argument("--alpha", type=float, default=significance.SIGNIFICANCE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", default=None, help="the metric the others are compared to")
    parser.add_argument("--out", default="metaeval.json")
    parser.add_argument("--csv", default=None, help="default: --out with .csv")
    return parser


def run(
    args: argparse.Namespace,
    builtin_scorers: Mapping[str, Callable[[], ComputeScore]] | None = None,
    model: str | None = None,
) -> int:
    """Judges the metrics on the sets of parsed ``args``; ``builtin_scorers`` names more
    metrics (built only when chosen), as i2ce_jax.evaluate adds I2CE.

    Prints one table per set and the comparisons with ``--baseline``, writes the JSON
    (``--out``, atomically) and the CSV beside it; returns the exit status, 0.

    Args:
        args: the arguments as :func:`parser` parses them.
        builtin_scorers: name -> a zero-argument function returning an object with
            pycocoevalcap's ``compute_score(gts, res)`` on raw captions.
        model: recorded as ``"model"`` in the JSON when given.

    Raises:
        ValueError: a bad option (a negative count, an unknown or clashing metric name).
        capsim.errors.CapsimError: a malformed file (the error names the file and row).
    """
    builtin_scorers = dict(builtin_scorers or {})
    for flag in ("bootstrap", "permutations"):
        if getattr(args, flag) < 0:
            raise ValueError(f"--{flag} must be >= 0, got {getattr(args, flag)}")
    if args.block_size < 1 or not 0 < args.alpha < 1:
        raise ValueError("--block_size must be >= 1 and --alpha in (0, 1)")
    specs = parse_specs(args.judgments)
    references = {k: Path(v) for k, v in _named(args.references, "--references").items()}
    plugins = _named(args.metric, "--metric")
    files = _named(args.scores, "--scores")
    builtin = [m for m in BUILTIN_METRIC_NAMES if not (args.no_meteor and m == "METEOR")]
    known = [*builtin, *builtin_scorers, *plugins, *files]
    reserved = {*BUILTIN_METRIC_NAMES, *builtin_scorers}
    clash = sorted(reserved & (set(plugins) | set(files)) | set(plugins) & set(files))
    if clash:
        raise ValueError(f"metric names {clash} are taken: choose other names")
    chosen = _chosen(args.metrics, known)
    baseline = args.baseline or chosen[0]
    if baseline not in chosen:
        raise ValueError(f"--baseline {baseline!r} is not among the metrics: {', '.join(chosen)}")
    scorers = {name: make() for name, make in builtin_scorers.items() if name in chosen}
    scorers.update({n: plugged_metric(n, spec) for n, spec in plugins.items() if n in chosen})
    given = _score_files({m: f for m, f in files.items() if m in chosen}, [n for n, _ in specs])
    loaded = {name: load_set(name, path, references.get(name)) for name, path in specs}
    results: dict = {"model": model, "sets": {}} if model else {"sets": {}}
    if args.bootstrap:
        results["bootstrap"] = {
            "resamples": args.bootstrap,
            "seed": args.seed,
            "confidence": 0.95,
            "baseline": baseline,
        }
    if args.permutations:
        results["perm_both"] = {
            "resamples": args.permutations,
            "block_size": args.block_size,
            "early_stop": [significance.EARLY_MIN, significance.EARLY_MAX],
            "seed": args.seed,
            "cluster_alpha": args.alpha,
        }
    for name, judgments in loaded.items():
        began = time.perf_counter()
        scored = score_set(
            name, judgments, scorers, given[name], [m for m in builtin if m in chosen]
        )
        scored.scores = {m: scored.scores[m] for m in chosen if m in scored.scores}
        scored_at = time.perf_counter()
        report, comparisons = set_report(scored, args.bootstrap, args.seed)
        clusters = set_significance(
            scored, report, comparisons, args.permutations, args.seed, args.block_size, args.alpha
        )
        seconds = {"scoring": scored_at - began, "statistics": time.perf_counter() - scored_at}
        entry = {
            "judgments": len(judgments),
            "metrics": report,
            "skipped": scored.skipped,
            "seconds": seconds,
        }
        if name == "pascal50s":
            entry["labels"] = pascal50s_labels(dict(specs)[name])
        if comparisons:
            entry["comparisons"] = comparisons
        if clusters:
            entry["clusters"] = clusters
        results["sets"][name] = entry
        print(
            f"\n{name}: {len(judgments)} judgments; scored in {seconds['scoring']:.1f} s, "
            f"statistics in {seconds['statistics']:.1f} s",
            flush=True,
        )
        print(_table(report, clusters.get(CLUSTER_TEST, {})))
        table = _comparison_table(comparisons, baseline, judgment_set(name).statistic)
        if table:
            print(f"\nagainst {baseline} (p: that the metric beats it; PERM-BOTH one-sided):")
            print(table)
        for metric, reason in scored.skipped.items():
            print(f"  {metric}: not reported ({reason})")
    out = Path(args.out)
    write_json_atomically(out, _finite_or_none(results))
    csv_path = Path(args.csv) if args.csv else out.with_suffix(".csv")
    csv_path.write_text(_csv_rows(results["sets"]), encoding="utf-8")
    print(f"\nwrote {out} and {csv_path}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """:func:`run` on ``argv`` (``sys.argv[1:]`` when None); returns the exit status."""
    return run(parser().parse_args(argv))


def cli() -> None:
    """The console script: bad input is one clear line (exit 1)."""
    try:
        sys.exit(main())
    except (CapsimError, ValueError) as error:
        sys.exit(f"capsim.metaeval: error: {error}")


if __name__ == "__main__":
    cli()
