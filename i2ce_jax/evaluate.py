"""I2CE against human judgments, beside BLEU-1..4, ROUGE-L, CIDEr and METEOR.

    python -m i2ce_jax.evaluate --judgments NAME:PATH[,NAME:PATH...] [--model base|large|research | --checkpoint W]
        [--references NAME=FILE] [--out evaluation.json]

``--help`` lists the sets, what PATH is for each (the files as their authors
publish them) and the statistic that heads each set's table, all from
``capsim.eval.judgment_sets.JUDGMENT_SETS``. tau_c and tau_b are Kendall τc and
τb, pearson is Pearson, each over rating rows (sets that name their captioning
systems, as THumB does, add system-level agreement); mean is the accuracy at
picking the candidate the human majority preferred, averaged over the set's
categories (PASCAL-50S: HC/HI/HM/MM, each reported too).

``--references NAME=FILE`` gives a set its references: a JSON object (image id
-> list of captions, as for i2ce_jax.score) or a Flickr8k token file. Flickr8k
candidates that are one of their image's references are skipped (CLIPScore
protocol). Each statistic is × 100. METEOR is capsim's Python METEOR 1.5 (no Java;
its data files come with pycocoevalcap) and is reported as missing without them. A table is printed per set and
everything is written to ``--out`` (replaced atomically).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from capsim.cli import run_command
from capsim.eval.judgment_harness import evaluate_judgments
from capsim.eval.judgment_sets import JUDGMENT_SETS, PUBLISHED_SETS, load_set
from capsim.tables import format_table
from i2ce_jax import pretrained
from i2ce_jax.score import write_atomically
from i2ce_jax.scorer import I2CEScorer


def _table(report: Mapping[str, dict]) -> str:
    columns = list(next(iter(report.values())))
    rows = [{"metric": metric, **values} for metric, values in report.items()]
    return format_table(rows, ["metric", *columns])


def _finite_or_none(value):
    """NaN (e.g. a correlation with a constant metric) becomes null, so the file stays JSON."""
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def sets_help() -> str:
    """A table of the published sets: name, what its PATH is, the statistic heading its report."""
    sets = [JUDGMENT_SETS[name] for name in PUBLISHED_SETS]
    name_width = max(len(s.name) for s in sets)
    path_width = max(len(s.path) for s in sets)
    lines = [f"  {s.name:<{name_width}}  {s.path:<{path_width}}  {s.statistic}" for s in sets]
    return "sets, what PATH is and their statistic:\n" + "\n".join(lines)


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
    parser.add_argument("--no_meteor", action="store_true", help="skip METEOR")
    parser.add_argument("--out", default="i2ce_evaluation.json")
    args = parser.parse_args(argv)
    specs = parse_specs(args.judgments)
    references = {k: Path(v) for k, _, v in (r.partition("=") for r in args.references)}
    loaded = {name: load_set(name, path, references.get(name)) for name, path in specs}
    scorer = (
        I2CEScorer.from_checkpoint(args.checkpoint)
        if args.checkpoint
        else I2CEScorer.pretrained(args.model)
    )
    results = {"model": args.checkpoint or args.model, "sets": {}}
    for name, judgments in loaded.items():
        report, skipped = evaluate_judgments(
            name, judgments, scorer.compute_score, not args.no_meteor
        )
        results["sets"][name] = {"judgments": len(judgments), "metrics": report, "skipped": skipped}
        print(f"\n{name}: {len(judgments)} judgments", flush=True)
        print(_table(report))
        for metric, reason in skipped.items():
            print(f"  {metric}: not reported ({reason})")
    write_atomically(Path(args.out), _finite_or_none(results))
    print(f"\nwrote {args.out}", file=sys.stderr)
    return 0


def cli() -> None:
    run_command(main, "i2ce_jax.evaluate")


if __name__ == "__main__":
    cli()
