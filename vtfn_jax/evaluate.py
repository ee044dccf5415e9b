"""Re-evaluate a finished run: ``python -m vtfn_jax.evaluate --workdir=W [--tasks=sts,sick,stsb]``.

Loads the run as a ``SentenceEncoder`` and runs the evaluators its
``config.evals`` names (capsim.eval.evaluators), by default its final-report
entries. ``--tasks`` picks entries by name: ``same_diff`` (same-image vs
different-image pairs of held-out images: Pearson against ±1, the paper's
COCO-Test, and ROC-AUC), ``retrieval`` (caption<->image MRR and R@k), ``sts``
(SemEval STS 2012-2016 per subset, per-year means, avg2016), ``sick`` (SICK-R),
``stsb`` (STS Benchmark) or ``shapes`` (the shapes world's pairs). Sentence-
similarity sets are read under ``--data_dir`` (default: the run's
``config.data.data_dir``) or from their own flags; naming a set's path adds it
to the default tasks. Only tasks on held-out captions rebuild the run's data.
Writes ``eval.json`` into the workdir and prints a table.

Evaluating goes through the run's data (``VtfnData.subject``), as training's
final report does, and never imports the trainer.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import ml_collections

from capsim.cli import run_command
from capsim.errors import CheckpointError
from capsim.eval.evaluators import Evaluators
from capsim.tables import format_table, results_rows
from vtfn_jax.data import VtfnData
from vtfn_jax.embedders import Embedder
from vtfn_jax.kinds import load_embedders
from vtfn_jax.sentence_encoder import SentenceEncoder
from vtfn_jax.workdir import run_data, saved_data

# Where the sentence-similarity sets live under a data_dir (see README, Real data).
STS_DIR = "sts"
SICK_FILE = "sick/SICK_test_annotated.txt"
STSB_DIR = "stsbenchmark"


def load_trained(config: ml_collections.ConfigDict, workdir: str | Path):
    """(data, embedder, image embedder or None) of a finished run, for re-evaluation."""
    data = run_data(config, workdir)
    embedder, image_embed = load_embedders(config, Path(workdir), data)
    return data, embedder, image_embed


def evaluate_encoder(
    evaluators: Evaluators,
    data: VtfnData,
    encoder: SentenceEncoder,
    names: list[str] | None = None,
) -> dict:
    """The final-report evaluators (or those named) on an encoder and its run's data."""
    return {
        "feature_source": data.feature_source,
        **evaluators.report(data.subject(encoder.embedder, encoder.embed_images), names),
    }


def evaluate_trained(
    config: ml_collections.ConfigDict,
    data: VtfnData,
    embedder: Embedder,
    image_embed: Callable | None,
    names: list[str] | None = None,
) -> dict:
    """The final-report evaluators of ``config.evals`` (or those named) on a trained kind,
    laid out as the report in results.json."""
    encoder = SentenceEncoder(embedder, image_embed, config)
    return evaluate_encoder(Evaluators(config.evals), data, encoder, names)


def similarity_entries(args: argparse.Namespace, data_dir: str) -> tuple[dict, list[str]]:
    """Entries for the STS, SICK-R and STS-B sets, and the names whose paths the flags gave."""
    entries = {
        "sts": dict(type="sts", sts_dir=args.sts_dir or f"{data_dir}/{STS_DIR}"),
        "sick": dict(
            type="sick",
            path=args.sick_path or f"{data_dir}/{SICK_FILE}",
            semeval_set=args.sick_set,
        ),
        "stsb": dict(
            type="stsb", stsb_dir=args.stsb_dir or f"{data_dir}/{STSB_DIR}", split=args.stsb_split
        ),
    }
    flags = {"sts": args.sts_dir, "sick": args.sick_path, "stsb": args.stsb_dir}
    return entries, [name for name, path in flags.items() if path or args.data_dir]


def evaluate(args: argparse.Namespace) -> dict:
    """Runs the chosen evaluations of the run in ``args.workdir`` and writes ``eval.json``."""
    workdir = Path(args.workdir)
    encoder = SentenceEncoder.from_checkpoint(workdir)
    config = encoder.config
    if "evals" not in config:
        raise CheckpointError(f"{workdir}/config.json has no 'evals': it predates them; retrain")
    evals = {name: dict(entry) for name, entry in config.evals.items()}
    entries, named = similarity_entries(args, args.data_dir or config.data.data_dir)
    for name, entry in entries.items():
        if name in named or name not in evals:
            evals[name] = entry
    if "sts" in named:  # the config's other STS entries (say sts16) follow the named folder
        for entry in evals.values():
            if entry["type"] == "sts":
                entry["sts_dir"] = entries["sts"]["sts_dir"]
    evaluators = Evaluators(evals)
    report = [name for name, entry in config.evals.items() if not entry.get("every")]
    tasks = args.tasks or list(dict.fromkeys(report + named))
    data = saved_data(config, workdir) if evaluators.text_only(tasks) else run_data(config, workdir)
    results = evaluate_encoder(evaluators, data, encoder, tasks)
    out = workdir / "eval.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(format_table(results_rows(results), ["task", "measure", "value"]))
    print(f"wrote {out}")
    return results


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True, help="a finished vtfn_jax.train workdir")
    parser.add_argument(
        "--tasks",
        type=lambda text: [t for t in text.split(",") if t],
        default=None,
        help="comma list of evaluations (default: the config's final report)",
    )
    parser.add_argument(
        "--data_dir", default="", help=f"holds {STS_DIR}/, {SICK_FILE}, {STSB_DIR}/"
    )
    parser.add_argument("--sts_dir", default="", help="STS 2012-2016 folder (<year>/*.tsv)")
    parser.add_argument("--sick_path", default="", help="SICK_test_annotated.txt or SICK.txt")
    parser.add_argument(
        "--sick_set", default="TEST", help="part of SICK.txt to score ('' for all pairs)"
    )
    parser.add_argument("--stsb_dir", default="", help="folder of sts-{train,dev,test}.csv")
    parser.add_argument("--stsb_split", default="test", help="STS-B split: train, dev or test")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    evaluate(parse_args(argv))
    return 0


def cli() -> None:
    run_command(main, "vtfn_jax.evaluate")


if __name__ == "__main__":
    cli()
