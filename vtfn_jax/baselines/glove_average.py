"""GloVe-average baseline: a sentence is the mean of its words' GloVe vectors.

Two variants, as in the VTFN paper: "R" (restricted) keeps only the words of
the training captions' vocabulary, so it knows exactly the words a trained
model could know; "NR" (non-restricted) keeps every word of the GloVe file.
Nothing is trained; ``load`` rebuilds the same embedder from the config.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import ml_collections
import numpy as np

from capsim import text
from capsim.data import glove
from capsim.task import Task
from capsim.workdir import is_main_process, save_config
from vtfn_jax.data import VtfnData
from vtfn_jax.embedders import DEFAULT_BATCH_SIZE

logger = logging.getLogger(__name__)

NOTE_FILE = "glove_average.json"


class WordAverageEmbedder:
    """Mean of the word vectors of a sentence's tokens (``capsim.text.tokenize``).

    Tokens without a vector are skipped; a sentence with none gets the zero
    vector, which the evaluation harness counts and scores as similarity 0.
    """

    def __init__(self, words: Sequence[str], vectors: np.ndarray):
        if len(words) != len(vectors):
            raise ValueError(f"{len(words)} words for {len(vectors)} vectors")
        self.vectors = np.asarray(vectors, np.float32)
        self.row_of: dict[str, int] = {}
        for row, word in enumerate(words):
            self.row_of.setdefault(word, row)

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    def covered(self, vocab: text.Vocab) -> float:
        """Fraction of the vocabulary's non-special words that have a vector."""
        words = vocab.itos[len(text.SPECIALS) :]
        return sum(word in self.row_of for word in words) / len(words) if words else 0.0

    def embed(self, texts: Sequence[str], batch_size: int = DEFAULT_BATCH_SIZE) -> np.ndarray:
        """``batch_size`` is the Embedder protocol's; averages are taken on the host, one by one."""
        out = np.zeros((len(texts), self.dim), np.float32)
        for index, sentence in enumerate(texts):
            rows = [self.row_of[t] for t in text.tokenize(sentence) if t in self.row_of]
            if rows:
                out[index] = self.vectors[rows].mean(axis=0)
        return out


def glove_embedder(source: str, vocab: text.Vocab | None) -> WordAverageEmbedder:
    """GloVe averages from ``"package"`` (glove.6B.50d) or a ``glove.*.txt`` path.

    With ``vocab`` (the restricted variant) only its words keep a vector.
    """
    if not source:
        raise ValueError(
            "the GloVe-average baseline needs config.model.glove ('package' or a path)"
        )
    if source == "package":
        words, vectors = glove.load_glove_package()
        if vocab is not None:
            rows = [row for row, word in enumerate(words) if word in vocab.stoi]
            words, vectors = [words[row] for row in rows], vectors[rows]
    else:
        words, vectors = glove.load_glove_text(source, vocab=vocab)
    return WordAverageEmbedder(words, vectors)


def _embedder_for(config: ml_collections.ConfigDict, data: VtfnData) -> WordAverageEmbedder:
    restricted = config.model.restricted
    return glove_embedder(config.model.glove, data.vocab if restricted else None)


def task(config: ml_collections.ConfigDict, data: VtfnData) -> Task:
    """Nothing to learn: the fit builds the embedder and notes its coverage of the
    training vocabulary (``glove_average.json``)."""

    def fit(workdir: Path) -> tuple[WordAverageEmbedder, dict]:
        embedder = _embedder_for(config, data)
        summary = {
            "vocab_covered": embedder.covered(data.vocab),
            "words_with_vectors": len(embedder.row_of),
            "dim": embedder.dim,
            "restricted": bool(config.model.restricted),
        }
        logger.info("GloVe average (%s): %s", config.model.glove, summary)
        if is_main_process():
            Path(workdir).mkdir(parents=True, exist_ok=True)
            save_config(config, workdir)
            (Path(workdir) / NOTE_FILE).write_text(json.dumps(summary, indent=2) + "\n")
        return embedder, summary

    return Task(subject_of=data.subject, fit=fit)


def load(config: ml_collections.ConfigDict, workdir: Path, data: VtfnData) -> WordAverageEmbedder:
    return _embedder_for(config, data)
