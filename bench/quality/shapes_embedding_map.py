"""Grounded against text-only sentence vectors on the shapes world, as a picture and a number.

    python bench/quality/shapes_embedding_map.py [--reuse] [--workdir /tmp/shapes_map]

Trains VTFN-BOW (configs/demo_bow.py, grounded in the images) and word2vec
(configs/baseline_word2vec.py on the shapes world, text only), embeds the test
captions that name exactly one colour, and draws each model's 2-D PCA map
coloured by that colour; "red" and its grounding-only synonym "scarlet" count
as the same colour, which only the images link. The number beside the picture
is the AUC of cosine similarity for same-colour against different-colour
caption pairs. Writes bench/results/shapes_embedding_map.png and a section of
bench/RESULTS.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# configs/ is used from the clone, not installed: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import itertools
from pathlib import Path

import numpy as np

from bench.harness import RESULTS_DIR, update_section
from capsim import viz
from capsim.data.shapes_world.lexicon import LEXICON
from capsim.eval.same_diff import roc_auc
from capsim.tables import format_table
from configs import baseline_word2vec, demo_bow
from vtfn_jax.evaluate import load_trained
from vtfn_jax.train import train_and_evaluate

PLOT = RESULTS_DIR / "shapes_embedding_map.png"
SECTION = "## Shapes world: grounded against text-only embeddings"
MAX_CAPTIONS = 800
MODELS = {
    "VTFN-BOW (grounded)": lambda: demo_bow.get_config(),
    "word2vec (text only)": lambda: baseline_word2vec.get_config("sources=shapes_world"),
}
# Every colour word of both registers -> the colour value it names.
COLOUR_OF = {
    word: value
    for words in LEXICON.values()
    for value, names in words["colour"].items()
    for word in names
}


def colour_labels(texts: list[str]) -> list[str | None]:
    """The one colour a caption names, or None when it names none or several."""
    labels = []
    for text in texts:
        named = {COLOUR_OF[w] for w in text.lower().replace(".", " ").split() if w in COLOUR_OF}
        labels.append(named.pop() if len(named) == 1 else None)
    return labels


def same_colour_auc(vectors: np.ndarray, labels: list[str]) -> float:
    """AUC × 100 of cosine similarity: same-colour pairs against different-colour pairs."""
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    pairs = list(itertools.combinations(range(len(labels)), 2))
    sims = np.array([unit[i] @ unit[j] for i, j in pairs])
    same = np.array([labels[i] == labels[j] for i, j in pairs])
    return 100.0 * roc_auc(sims, same)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", default="/tmp/shapes_map")
    parser.add_argument("--reuse", action="store_true", help="use finished workdirs")
    args = parser.parse_args()
    vectors, rows, texts, labels = {}, [], None, None
    for index, (name, make_config) in enumerate(MODELS.items()):
        config, workdir = make_config(), Path(args.workdir) / f"model{index}"
        if not args.reuse:
            train_and_evaluate(config, workdir)
        data, embedder, _ = load_trained(config, workdir)
        if texts is None:
            test = [r.text for r in data.splits["test"].corpus.records]
            named = [(t, c) for t, c in zip(test, colour_labels(test), strict=True) if c]
            texts, labels = (
                [t for t, _ in named][:MAX_CAPTIONS],
                [c for _, c in named][:MAX_CAPTIONS],
            )
        vectors[name] = embedder.embed(texts)
        rows.append({"model": name, "same-colour AUC x100": same_colour_auc(vectors[name], labels)})
    viz.embedding_map(
        vectors, labels, PLOT, title="shapes-world test captions by the colour they name"
    )
    table = format_table(rows, ["model", "same-colour AUC x100"])
    print(table)
    command = "python bench/quality/shapes_embedding_map.py"
    update_section(
        SECTION,
        f"{SECTION}\n\nCommand: `{command}`\n\n"
        f"{len(texts)} test captions that name exactly one colour, in either register (so "
        '"red" and "scarlet" are one colour: grounding-only synonyms, never in one caption). '
        "2-D PCA of the unit sentence vectors; AUC of cosine similarity for same-colour against "
        f"different-colour pairs (chance 50).\n\n{table}\n\n"
        "![grounded against text-only](results/shapes_embedding_map.png)\n",
    )


if __name__ == "__main__":
    main()
