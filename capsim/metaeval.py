"""Any caption metric judged against human judgments, to the MT field's standard.

    python -m capsim.metaeval --judgments NAME:PATH[,NAME:PATH...] [--judgments NAME:PATH ...]
        [--metric NAME=MODULE:ATTR ...] [--scores NAME=FILE ...] [--metrics a,b,...]
        [--references NAME=FILE] [--bootstrap N] [--permutations K --block_size B]
        [--alpha A] [--seed S] [--baseline NAME] [--out metaeval.json] [--csv F]

``--help`` lists the sets, what PATH is for each (the files as their authors or recent
metric papers ship them; ``pairs:FILE`` and ``csv:FILE`` are a user's own pairwise and
absolute sets), the statistic that heads each set's table and the row ids of
``--scores`` files, all from ``capsim.eval.judgment_sets.JUDGMENT_SETS``. ``--judgments``
may be repeated, or take several sets joined by commas; an unknown set is one line and
exit status 2.

The metrics: BLEU-1..4, ROUGE-L, CIDEr-D and METEOR (capsim's, no Java), each
``--metric NAME=MODULE:ATTR`` (an object with pycocoevalcap's ``compute_score(gts,
res)`` on raw captions, or a class or zero-argument function returning one) and each
``--scores NAME=FILE`` (a JSON object: row id -> score, or set name -> that object
when several sets are given). ``--metrics`` chooses and orders them.

Absolute sets report Kendall τc and τb, Spearman and Pearson over rating rows (the
set's own statistic first), system-level agreement where the set names 3 or more
systems, the set's statistic item-grouped (within each image, averaged), and pairwise
accuracy over candidates of the same image with and without tie calibration (acc_eq
and its ε). PASCAL-50S reports its accuracy per category and their mean; a pair set
(FOIL-nocaps too), the share of pairs whose better caption the metric scores higher; a
set of labelled captions (HAT), the AUROC of the score against "not flawed" and the
average precision of finding the flawed captions by a low score, beside its chance level.

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
import dataclasses
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from capsim.data.captions import read_json_file
from capsim.errors import CapsimError, DataFormatError
from capsim.eval import perm_both
from capsim.eval.judgment_harness import score_set, set_report
from capsim.eval.judgment_sets import (
    JUDGMENT_SETS,
    JudgmentSet,
    judgment_set,
    load_set,
    published_sets,
)
from capsim.eval.metaeval_output import print_set, write_results
from capsim.eval.plugged_metrics import ComputeScore, plugged_metric
from capsim.eval.set_comparisons import SIGNIFICANCE, compare_metrics
from capsim.metrics.coco_metrics import BUILTIN_METRIC_NAMES


def sets_help() -> str:
    """The published sets: name, what its PATH is, its statistic, its row ids (the text that
    ends ``--help``)."""
    sets = [JUDGMENT_SETS[name] for name in published_sets()]
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


class UsageError(ValueError):
    """A command line that names no set the command knows (exit status 2, as argparse's)."""


def parse_specs(texts: str | Sequence[str]) -> list[tuple[str, Path]]:
    """``--judgments NAME:PATH[,NAME:PATH...]``, given once or repeated, as (name, path)
    pairs, in order; a UsageError when an item is not ``NAME:PATH``, names no published
    set, or names a set given before.

    >>> parse_specs("flickr8k_expert:data/flickr8k,pairs:long_pairs.jsonl")
    [('flickr8k_expert', PosixPath('data/flickr8k')), ('pairs', PosixPath('long_pairs.jsonl'))]
    >>> parse_specs(["hat:hat_trainval.json", "foil_nocaps:foil_nocaps_dev.json"])
    [('hat', PosixPath('hat_trainval.json')), ('foil_nocaps', PosixPath('foil_nocaps_dev.json'))]
    """
    published = published_sets()
    specs: list[tuple[str, Path]] = []
    for text in [texts] if isinstance(texts, str) else texts:
        for item in filter(None, text.split(",")):
            name, sep, path = item.partition(":")
            if not sep or name not in published:
                raise UsageError(
                    f"--judgments wants NAME:PATH with NAME in {list(published)}, got {item!r}"
                )
            if any(name == given for given, _ in specs):
                raise UsageError(f"--judgments: {name!r} is given twice; give each set once")
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


def parser(description: str | None = None, epilog: str | None = None) -> argparse.ArgumentParser:
    """The command's ``argparse`` parser; a face such as i2ce_jax.evaluate adds its own
    arguments. ``description`` and ``epilog`` (the text above and below the options)
    default to the module docstring's first paragraph and :func:`sets_help`."""
    parser = argparse.ArgumentParser(
        description=description or __doc__.split("\n\n")[0],
        epilog=epilog or sets_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--judgments",
        required=True,
        action="append",
        metavar="NAME:PATH[,NAME:PATH...]",
        help="the sets to judge on (repeatable)",
    )
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
        default=perm_both.PERM_BOTH_RESAMPLES,
        metavar="K",
        help="PERM-BOTH resamples between each pair of metrics (0: none)",
    )
    parser.add_argument(
        "--block_size",
        type=int,
        default=perm_both.PERM_BOTH_BLOCK,
        help="PERM-BOTH checks its early stop every this many resamples",
    )
    parser.add_argument("--alpha", type=float, default=SIGNIFICANCE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", default=None, help="the metric the others are compared to")
    parser.add_argument("--out", default="metaeval.json")
    parser.add_argument("--csv", default=None, help="default: --out with .csv")
    return parser


@dataclasses.dataclass
class ChosenMetrics:
    """The metrics a run judges, in order: ``builtin`` n-gram ones, ``scorers`` on raw
    captions, ``given`` scores (set -> metric -> row id -> score); ``baseline`` is the one
    the others are compared to."""

    names: list[str]
    baseline: str
    builtin: list[str]
    scorers: dict[str, ComputeScore]
    given: dict[str, dict[str, dict]]


def _check_counts(args: argparse.Namespace) -> None:
    for flag in ("bootstrap", "permutations"):
        if getattr(args, flag) < 0:
            raise ValueError(f"--{flag} must be >= 0, got {getattr(args, flag)}")
    if args.block_size < 1 or not 0 < args.alpha < 1:
        raise ValueError("--block_size must be >= 1 and --alpha in (0, 1)")


def _choose_metrics(
    args: argparse.Namespace,
    builtin_scorers: Mapping[str, Callable[[], ComputeScore]],
    sets: list[str],
) -> ChosenMetrics:
    """The metrics ``--metrics`` chooses among the built-in ones, ``builtin_scorers``,
    ``--metric`` and ``--scores``; a name taken twice is an error. Scorers are built here,
    only when chosen."""
    plugins = _named(args.metric, "--metric")
    files = _named(args.scores, "--scores")
    builtin = [m for m in BUILTIN_METRIC_NAMES if not (args.no_meteor and m == "METEOR")]
    reserved = {*BUILTIN_METRIC_NAMES, *builtin_scorers}
    clash = sorted(reserved & (set(plugins) | set(files)) | set(plugins) & set(files))
    if clash:
        raise ValueError(f"metric names {clash} are taken: choose other names")
    chosen = _chosen(args.metrics, [*builtin, *builtin_scorers, *plugins, *files])
    baseline = args.baseline or chosen[0]
    if baseline not in chosen:
        raise ValueError(f"--baseline {baseline!r} is not among the metrics: {', '.join(chosen)}")
    scorers = {name: make() for name, make in builtin_scorers.items() if name in chosen}
    scorers.update({n: plugged_metric(n, spec) for n, spec in plugins.items() if n in chosen})
    given = _score_files({m: f for m, f in files.items() if m in chosen}, sets)
    return ChosenMetrics(chosen, baseline, [m for m in builtin if m in chosen], scorers, given)


def _settings(args: argparse.Namespace, baseline: str, model: str | None) -> dict:
    """The JSON's head: the model, and the settings of the bootstrap and of PERM-BOTH."""
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
            "early_stop": [perm_both.EARLY_MIN, perm_both.EARLY_MAX],
            "seed": args.seed,
            "cluster_alpha": args.alpha,
        }
    return results


def _judge_set(
    spec: JudgmentSet, path: Path, judgments: list, metrics: ChosenMetrics, args
) -> dict:
    """One set's JSON entry: every figure of every chosen metric, which human labels its
    file brought where the set says, and the seconds taken."""
    began = time.perf_counter()
    given = metrics.given[spec.name]
    scored = score_set(spec, judgments, metrics.scorers, given, metrics.builtin)
    scored.scores = {m: scored.scores[m] for m in metrics.names if m in scored.scores}
    scored_at = time.perf_counter()
    report, comparisons = set_report(scored, args.bootstrap, args.seed)
    compared = compare_metrics(
        scored, report, comparisons, args.permutations, args.seed, args.block_size, args.alpha
    )
    entry = {
        "judgments": len(judgments),
        "metrics": compared.metrics,
        "skipped": scored.skipped,
        "seconds": {"scoring": scored_at - began, "statistics": time.perf_counter() - scored_at},
    }
    if compared.comparisons:
        entry["comparisons"] = compared.comparisons
    if compared.clusters:
        entry["clusters"] = compared.clusters
    if spec.labels is not None:
        entry["labels"] = spec.labels(path)
    return entry


def run(
    args: argparse.Namespace,
    builtin_scorers: Mapping[str, Callable[[], ComputeScore]] | None = None,
    model: str | None = None,
    prog: str = "capsim.metaeval",
) -> int:
    """Judges the metrics on the sets of parsed ``args``; ``builtin_scorers`` names more
    metrics (built only when chosen), as i2ce_jax.evaluate adds I2CE.

    Prints one table per set and the comparisons with ``--baseline``, writes the JSON
    (``--out``, atomically) and the CSV beside it; returns the exit status: 0, or 2 when
    ``--judgments`` names a set the command does not know (one line on stderr).

    Args:
        args: the arguments as :func:`parser` parses them.
        builtin_scorers: name -> a zero-argument function returning an object with
            pycocoevalcap's ``compute_score(gts, res)`` on raw captions.
        model: recorded as ``"model"`` in the JSON when given.
        prog: the command's name, which begins the line of a usage error.

    Raises:
        ValueError: a bad option (a negative count, an unknown or clashing metric name).
        capsim.errors.CapsimError: a malformed file (the error names the file and row).
    """
    _check_counts(args)
    try:
        specs = [(judgment_set(name), path) for name, path in parse_specs(args.judgments)]
    except UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    references = {k: Path(v) for k, v in _named(args.references, "--references").items()}
    metrics = _choose_metrics(args, builtin_scorers or {}, [spec.name for spec, _ in specs])
    loaded = [load_set(spec, path, references.get(spec.name)) for spec, path in specs]
    results = _settings(args, metrics.baseline, model)
    for (spec, path), judgments in zip(specs, loaded, strict=True):
        entry = _judge_set(spec, path, judgments, metrics, args)
        results["sets"][spec.name] = entry
        print_set(spec.name, spec.statistic, entry, metrics.baseline)
    statistics = {spec.name: spec.statistic for spec, _ in specs}
    write_results(results, statistics, Path(args.out), Path(args.csv) if args.csv else None)
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
