"""Evaluate any sentence embedder: ``python -m vtfn_jax.evaluate --workdir=... --tasks=...``.

Tasks (registry ``TASKS``):
  same_diff  same-image vs different-image caption pairs of held-out images
             (1000 + 1000, by seed): Pearson against ±1 (the paper's COCO-Test) and ROC-AUC
  retrieval  caption<->image MRR and R@1/5/10 on held-out images (models with an image map)
  sts        SemEval STS 2012-2016 from ``config.eval.sts_dir``: Pearson/Spearman per
             subset, mean/wmean/all per year, avg2016
  shapes     the shapes world's graded pairs, synonym pairs and same/diff pairs
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import ml_collections
import numpy as np
from absl import app, flags
from scipy import stats

from capsim.eval import sts as sts_lib
from capsim.eval.retrieval import retrieval_metrics
from capsim.eval.same_diff import evaluate_same_diff, make_same_diff_pairs
from capsim.train.writers import load_config, setup_logging
from vtfn_jax.data import VtfnData
from vtfn_jax.embedders import Embedder

logger = logging.getLogger(__name__)

PERCENT = 100.0
SAME_DIFF_PAIRS = 1000
ImageEmbed = Callable[[np.ndarray], np.ndarray]


def _pair_spearman(embedder: Embedder, pairs: Sequence) -> float:
    first = [p.text_a for p in pairs]
    second = [p.text_b for p in pairs]
    sims = sts_lib.embed_pairs(embedder.embed, first, second, "shapes pairs")
    gold = np.array([p.score for p in pairs])
    return PERCENT * float(stats.spearmanr(sims, gold).statistic)


def eval_same_diff(embedder, data, config, image_embed):
    test = data.splits["test"].corpus
    pairs = make_same_diff_pairs(test.texts_by_image(), SAME_DIFF_PAIRS, seed=config.seed)
    return evaluate_same_diff(embedder.embed, pairs)


def eval_retrieval(embedder, data, config, image_embed):
    if image_embed is None:
        return None
    split = data.splits["test"]
    captions = embedder.embed([r.text for r in split.corpus.records])
    images = image_embed(split.features)
    captions = captions / np.maximum(np.linalg.norm(captions, axis=1, keepdims=True), 1e-12)
    images = images / np.maximum(np.linalg.norm(images, axis=1, keepdims=True), 1e-12)
    return retrieval_metrics(captions @ images.T, split.corpus.image_index)


def eval_sts(embedder, data, config, image_embed):
    sts_dir = Path(config.eval.sts_dir).expanduser()
    if not sts_dir.is_dir():
        logger.warning("STS skipped: %s is not a directory", sts_dir)
        return None
    return sts_lib.evaluate_sts(embedder.embed, sts_lib.read_sts_dir(sts_dir))


def eval_shapes(embedder, data, config, image_embed):
    world = data.world
    if world is None:
        return None
    same_diff = evaluate_same_diff(
        embedder.embed, [(p.text_a, p.text_b, int(p.score)) for p in world.same_diff_pairs]
    )
    return {
        "graded_spearman": _pair_spearman(embedder, world.graded_pairs),
        "synonym_spearman": _pair_spearman(embedder, world.synonym_pairs),
        "same_diff_auc": same_diff["auc"],
        "same_diff_pearson": same_diff["pearson"],
    }


TASKS = {
    "same_diff": eval_same_diff,
    "retrieval": eval_retrieval,
    "sts": eval_sts,
    "shapes": eval_shapes,
}


def evaluate_embedder(
    embedder: Embedder,
    data: VtfnData,
    config: ml_collections.ConfigDict,
    tasks: Sequence[str],
    image_embed: ImageEmbed | None = None,
) -> dict:
    """Runs each named task; a task that does not apply (no image map, no STS data) gives None."""
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise KeyError(f"unknown evaluation tasks {unknown}; known: {sorted(TASKS)}")
    results = {"feature_source": data.feature_source}
    for task in tasks:
        results[task] = TASKS[task](embedder, data, config, image_embed)
        logger.info("%s: %s", task, _brief(results[task]))
    return results


def _brief(result) -> str:
    if not isinstance(result, dict):
        return str(result)
    return (
        ", ".join(f"{k}={v:.2f}" for k, v in result.items() if isinstance(v, float | int))
        or json.dumps(result)[:200]
    )


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    setup_logging()
    from vtfn_jax.train import load_trained

    workdir = Path(flags.FLAGS.workdir)
    config = load_config(workdir)
    data, embedder, image_embed = load_trained(config, workdir)
    results = evaluate_embedder(embedder, data, config, flags.FLAGS.tasks, image_embed)
    out = workdir / "eval.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


def cli() -> None:
    flags.DEFINE_string("workdir", None, "A finished vtfn_jax.train workdir.", required=True)
    flags.DEFINE_list("tasks", list(TASKS), "Tasks to run.")
    app.run(main)


if __name__ == "__main__":
    cli()
