"""Sentence vectors from any trained VTFN or baseline workdir, called like sentence-transformers.

    encoder = SentenceEncoder.from_checkpoint("runs/bow")
    vectors = encoder.encode(["a dog runs", "a cat sleeps"])  # [2, D] NumPy

Every evaluation of a run (training-time dev numbers, the final report,
``python -m vtfn_jax.evaluate``, the STS harness) embeds text through
``encode`` (vtfn_jax.embedders.encode_sentences), so there is one encoding path. Loading reads the workdir's
``config.json``, ``vocab.json``, ``data.json`` and weights only: no captions
or image features (a run from before ``data.json`` rebuilds its data once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import ml_collections
import numpy as np

from capsim.errors import CheckpointError
from capsim.workdir import load_config
from vtfn_jax import kinds
from vtfn_jax import workdir as vtfn_workdir
from vtfn_jax.embedders import Embedder, encode_sentences


class SentenceEncoder:
    """A trained kind's text tower (and, for VTFN, its image map) behind one ``encode``.

    Usually built by :meth:`from_checkpoint`.

    Args:
        embedder: the text tower and its vocabulary (``vtfn_jax.embedders.Embedder``).
        embed_images: maps image features ``[N, F]`` into the sentence space ``[N, D]``
            (None for the baselines, which have no image tower).
        config: the run's config when loaded from a workdir.

    Example::

        encoder = SentenceEncoder.from_checkpoint("runs/bow")
        vectors = encoder.encode(["a dog runs on the grass", "a cat sleeps"])  # [2, D]
        image_vectors = encoder.embed_images(features)  # VTFN only: [N, D]
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

        Reads ``config.json``, ``vocab.json``, ``data.json`` and the best checkpoint's
        weights, never the captions or image features.

        Args:
            workdir: a VTFN or baseline training workdir.

        Returns:
            The run's encoder, with ``embed_images`` for VTFN and ``config`` set.

        Raises:
            capsim.errors.CheckpointError: ``workdir`` is missing, damaged or not a
                ``vtfn_jax.train`` workdir (the error names it).
            ImportError: the run needs an optional extra that is not installed (gensim,
                the GloVe package); the message names the extra.
        """
        workdir = Path(workdir)
        if not workdir.is_dir():
            raise CheckpointError(f"workdir {workdir} does not exist")
        try:
            config = load_config(workdir)
            data = vtfn_workdir.saved_data(config, workdir)
            embedder, embed_images = kinds.load_embedders(config, workdir, data)
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
        without a token gets the zero vector, and their count is logged. The vectors
        do not depend on the batch size or on the other sentences of the call.

        Args:
            sentences: one string, or a sequence of strings.
            batch_size: the most rows of a device batch (it never changes the vectors).
            normalize_embeddings: unit rows (zero rows stay zero).
            show_progress_bar: None shows it when INFO logging is on and the input takes
                more than one chunk of ``batch_size * CHUNK_BATCHES``.

        Returns:
            float32 NumPy vectors: ``[N, D]``, or ``[D]`` for a single string.
        """
        return encode_sentences(
            self.embedder, sentences, batch_size, normalize_embeddings, show_progress_bar
        )
