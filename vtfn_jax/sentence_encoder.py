"""Sentence vectors from any trained VTFN or baseline workdir, called like sentence-transformers.

    encoder = SentenceEncoder.from_checkpoint("runs/bow")
    vectors = encoder.encode(["a dog runs", "a cat sleeps"])  # [2, D] NumPy

Every evaluation of a run (training-time dev numbers, the final report,
``python -m vtfn_jax.evaluate``, the STS harness) embeds text through
``encode``, so there is one encoding path. Loading reads the workdir's
``config.json``, ``vocab.json``, ``data.json`` and weights only: no captions
or image features (a run from before ``data.json`` rebuilds its data once).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import ml_collections
import numpy as np

from capsim import text
from capsim.errors import CaptionError, CheckpointError
from capsim.progress import Progress
from capsim.workdir import load_config
from vtfn_jax import workdir as vtfn_workdir
from vtfn_jax.embedders import Embedder

logger = logging.getLogger(__name__)

# Sentences per call of the embedder: batch_size times this. Progress is reported between calls.
CHUNK_BATCHES = 64


class SentenceEncoder:
    """A trained kind's text tower (and, for VTFN, its image map) behind one ``encode``.

    ``embed_images`` maps image features into the sentence space (None for the
    baselines, which have no image tower); ``config`` is the run's config when
    loaded from a workdir.
    """

    def __init__(
        self,
        embedder: Embedder,
        embed_images: Callable[[np.ndarray], np.ndarray] | None = None,
        config: ml_collections.ConfigDict | None = None,
    ):
        self.embedder, self.embed_images, self.config = embedder, embed_images, config

    @classmethod
    def from_checkpoint(cls, workdir: str | Path) -> SentenceEncoder:
        """Loads the run in ``workdir`` (written by ``python -m vtfn_jax.train``), any model kind.

        A missing or damaged workdir raises CheckpointError naming it; a missing
        optional extra (gensim, the GloVe package) raises ImportError naming the extra.
        """
        workdir = Path(workdir)
        if not workdir.is_dir():
            raise CheckpointError(f"workdir {workdir} does not exist")
        try:
            config = load_config(workdir)
            data = vtfn_workdir.saved_data(config, workdir)
            embedder, embed_images = vtfn_workdir.load_kind(config, workdir, data)
        except (CheckpointError, ImportError):
            raise
        except Exception as error:  # bad JSON, a foreign config, unreadable vectors, ...
            raise CheckpointError(
                f"{workdir} is not a loadable vtfn_jax.train workdir: {type(error).__name__}: {error}"
            ) from error
        return cls(embedder, embed_images, config)

    def encode(
        self,
        sentences: str | Sequence[str],
        batch_size: int = 64,
        normalize_embeddings: bool = False,
        show_progress_bar: bool | None = None,
    ) -> np.ndarray:
        """[N, D] vectors of ``sentences`` ([D] for a single string), as sentence-transformers.

        Any length and any words (unknown ones go through ``<unk>``); a sentence
        without a token gets the zero vector, and their count is logged.
        ``batch_size`` bounds the rows of a device batch and never changes the
        vectors. ``normalize_embeddings`` gives unit rows (zero rows stay zero).
        ``show_progress_bar``: None shows it when INFO logging is on and the
        input takes more than one chunk of ``batch_size * CHUNK_BATCHES``.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        for index, sentence in enumerate(texts):
            if not isinstance(sentence, str):
                raise CaptionError(index, f"must be a string, got {type(sentence).__name__}")
        lengths = np.array([len(text.tokenize(sentence)) for sentence in texts], np.int64)
        empty = int(np.sum(lengths == 0))
        if empty:
            logger.info("%d of %d sentences are empty: zero vectors", empty, len(texts))
        # Similar lengths share a chunk, so few of its bucket batches run part-filled.
        order = np.argsort(lengths, kind="stable")
        chunks = np.array_split(order, max(1, math.ceil(len(texts) / (batch_size * CHUNK_BATCHES))))
        if show_progress_bar is None:
            show_progress_bar = len(chunks) > 1 and logger.isEnabledFor(logging.INFO)
        progress = Progress(len(texts), unit="sentences", item="sentences", prefix="encode: ")
        vectors, done = None, 0
        for number, chunk in enumerate(chunks, start=1):
            out = np.asarray(self.embedder.embed([texts[i] for i in chunk], batch_size=batch_size))
            if vectors is None:
                vectors = np.zeros((len(texts), out.shape[1]), out.dtype)
            vectors[chunk], done = out, done + len(chunk)
            if show_progress_bar:
                progress.report(done, final=number == len(chunks))
        if normalize_embeddings:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = vectors / np.where(norms > 0, norms, 1)
        return vectors[0] if single else vectors
