"""Re-evaluate a finished run: ``python -m vtfn_jax.evaluate --workdir=W [--tasks=sts,same_diff]``.

Runs the evaluators the run's ``config.evals`` names (capsim.eval.evaluators),
by default its final-report entries; ``--tasks`` picks entries by name, e.g.
``same_diff`` (same-image vs different-image pairs of held-out images: Pearson
against ±1, the paper's COCO-Test, and ROC-AUC), ``retrieval`` (caption<->image
MRR and R@k), ``sts`` (SemEval STS 2012-2016 per subset, per-year means,
avg2016) or ``shapes`` (the shapes world's graded, synonym and same/diff pairs).
Writes ``eval.json`` into the workdir and prints a table.
"""

from __future__ import annotations

import json
from pathlib import Path

from absl import app, flags

from capsim.eval.correlation import format_table, results_rows
from capsim.train.writers import load_config, setup_logging
from vtfn_jax.train import evaluate_trained, load_trained


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    setup_logging(verbose=flags.FLAGS.verbosity >= 1)
    workdir = Path(flags.FLAGS.workdir)
    config = load_config(workdir)
    if "evals" not in config:
        raise app.UsageError(f"{workdir}/config.json has no 'evals': it predates them; retrain")
    data, embedder, image_embed = load_trained(config, workdir)
    results = evaluate_trained(config, data, embedder, image_embed, flags.FLAGS.tasks)
    out = workdir / "eval.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(format_table(results_rows(results), ["task", "measure", "value"]))
    print(f"wrote {out}")


def cli() -> None:
    flags.DEFINE_string("workdir", None, "A finished vtfn_jax.train workdir.", required=True)
    flags.DEFINE_list("tasks", None, "Entries of config.evals to run (default: the final report).")
    app.run(main)


if __name__ == "__main__":
    cli()
