"""I2CE against human judgments, beside BLEU-1..4, ROUGE-L, CIDEr and METEOR.

    python -m i2ce_jax.evaluate --judgments NAME:PATH[,NAME:PATH...] [--model base | --checkpoint W]
        [--references NAME=FILE] [--out evaluation.json]

Sets and what PATH is (the files as their authors publish them):

  flickr8k_expert  a folder with ExpertAnnotations.txt and Flickr8k.token.txt    Kendall τc
  flickr8k_cf      a folder with CrowdFlowerAnnotations.txt and Flickr8k.token.txt  Kendall τb
  thumb            mscoco_THumB-1.0.jsonl (mscoco_references.json beside it)      Pearson + system level
  pascal50s        pair_pascal.mat (consensus_pascal.mat beside it)               accuracy HC/HI/HM/MM
  composite        an AMT result CSV; needs --references composite=FILE           Kendall τc

``--references NAME=FILE`` gives a set its references: a JSON object (image id
-> list of captions, as for i2ce_jax.score) or a Flickr8k token file. Flickr8k
candidates that are one of their image's references are skipped (CLIPScore
protocol). Each statistic is × 100. METEOR runs when Java and pycocoevalcap are
present, and is reported as missing otherwise. A table is printed per set and
everything is written to ``--out`` (replaced atomically).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from capsim.data import judgments as readers
from capsim.data.captions import read_flickr8k_tokens, split_flickr8k_id
from capsim.errors import CapsimError, DataFormatError
from capsim.eval import judgment_harness as harness
from capsim.eval.correlation import format_table
from capsim.train.writers import setup_logging
from i2ce_jax.score import read_refs, write_atomically
from i2ce_jax.scorer import I2CEScorer

SETS = ("flickr8k_expert", "flickr8k_cf", "thumb", "pascal50s", "composite")


def _references(path: Path) -> dict[str, list[str]]:
    """image id -> captions, from a refs JSON or a Flickr8k token file."""
    if path.suffix == ".json":
        return read_refs(path)
    refs: dict[str, list[str]] = {}
    for caption_id, caption in read_flickr8k_tokens(path).items():
        refs.setdefault(split_flickr8k_id(caption_id)[0], []).append(caption)
    return refs


def load_set(name: str, path: Path, references: Path | None):
    """The judgments of one set: Judgment records, or PairJudgment for pascal50s."""
    refs = _references(references) if references else None
    if name == "flickr8k_expert":
        return readers.read_flickr8k_expert(
            path / "ExpertAnnotations.txt", path / "Flickr8k.token.txt"
        )
    if name == "flickr8k_cf":
        return readers.read_flickr8k_cf(
            path / "CrowdFlowerAnnotations.txt", path / "Flickr8k.token.txt"
        )
    if name == "thumb":
        beside = path.with_name("mscoco_references.json")
        return readers.read_thumb(path, beside if beside.exists() else None)
    if name == "pascal50s":
        return readers.read_pascal50s(path, refs)
    if name == "composite":
        if refs is None:
            raise DataFormatError(
                path, "Composite files hold no references: pass --references composite=FILE"
            )
        return readers.read_composite_csv(path, refs)
    raise ValueError(f"unknown judgment set {name!r}; known: {', '.join(SETS)}")


def evaluate_set(
    name: str, judgments: list, score: Callable, include_meteor: bool
) -> tuple[dict[str, dict], dict[str, str]]:
    """(per metric: the set's statistics, metrics that could not run and why)."""
    if name == "pascal50s":
        pairs = harness.preference_pairs(judgments)
    else:
        if not all(j.references for j in judgments):
            raise DataFormatError(name, "some judgments have no references")
        pairs = harness.group_judgments(judgments)
    scores, skipped = harness.ngram_metric_scores(pairs, include_meteor=include_meteor)
    scores["I2CE"] = np.asarray(score(pairs.gts, pairs.res)[1], np.float64)
    if name == "pascal50s":
        return harness.pascal_report(pairs, scores), skipped
    systems = [""] * len(pairs.keys)
    for j, pair in zip(judgments, pairs.pair_of_rating, strict=True):
        systems[pair] = j.system or ""
    return harness.absolute_report(name, pairs, scores, systems if any(systems) else ()), skipped


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


def parse_specs(text: str) -> list[tuple[str, Path]]:
    specs = []
    for item in filter(None, text.split(",")):
        name, sep, path = item.partition(":")
        if not sep or name not in SETS:
            raise ValueError(f"--judgments wants NAME:PATH with NAME in {SETS}, got {item!r}")
        specs.append((name, Path(path)))
    return specs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judgments", required=True, help="NAME:PATH[,NAME:PATH...]")
    parser.add_argument("--model", default="base", help="packaged model: base or large")
    parser.add_argument("--checkpoint", default=None, help="an I2CE training workdir instead")
    parser.add_argument("--references", action="append", default=[], metavar="NAME=FILE")
    parser.add_argument("--no_meteor", action="store_true", help="skip METEOR even with Java")
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
        report, skipped = evaluate_set(name, judgments, scorer.compute_score, not args.no_meteor)
        results["sets"][name] = {"judgments": len(judgments), "metrics": report, "skipped": skipped}
        print(f"\n{name}: {len(judgments)} judgments", flush=True)
        print(_table(report))
        for metric, reason in skipped.items():
            print(f"  {metric}: not reported ({reason})")
    write_atomically(Path(args.out), _finite_or_none(results))
    print(f"\nwrote {args.out}", file=sys.stderr)
    return 0


def cli() -> None:
    setup_logging()
    try:
        sys.exit(main())
    except CapsimError as error:
        sys.exit(f"i2ce_jax.evaluate: error: {error}")


if __name__ == "__main__":
    cli()
