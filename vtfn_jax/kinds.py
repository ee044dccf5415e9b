"""The one table of VTFN model kinds: ``vtfn`` and the baselines, each declared once.

``KINDS[config.model.kind]`` says how a kind trains (``task``: a capsim.task.Task
that capsim.train.recipe runs), how a finished workdir loads it (``load``) and
what the evaluators embed with (``embedders``: a text Embedder and an image map,
or None for the baselines, which have no image tower). Declaring never imports
the trainer, so loading a run (SentenceEncoder, vtfn_jax.evaluate) stays apart from it.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import ml_collections
import numpy as np

from capsim.checkpoints import restore_model
from capsim.data import glove
from capsim.data.corpus import CaptionSplit
from capsim.data.device_tables import rows_key
from capsim.data.pipeline import Batches
from capsim.task import Task
from vtfn_jax.baselines import glove_average, language_models, word2vec
from vtfn_jax.data import ImageEmbed, VtfnData
from vtfn_jax.embedders import Embedder, TokenEmbedder
from vtfn_jax.model import VTFN, build_model, make_loss_fn

Embedders = tuple[Embedder, ImageEmbed | None]


@dataclasses.dataclass(frozen=True)
class Kind:
    """One model kind: ``task(config, data)``, ``load(config, workdir, data) -> model``
    and ``embedders(model, data) -> (text embedder, image embedder or None)``."""

    task: Callable[[ml_collections.ConfigDict, VtfnData], Task]
    load: Callable[[ml_collections.ConfigDict, Path, VtfnData], Any]
    embedders: Callable[[Any, VtfnData], Embedders]


# --------------------------------------------------------------------------- vtfn
def _embed_text(model: VTFN, ids, mask):
    return model.embed_text(ids, mask)


def vtfn_embedders(model: VTFN, data: VtfnData) -> Embedders:
    """The text tower behind the run's vocabulary, and W applied to image features."""
    return (
        TokenEmbedder(model, data.vocab, _embed_text),
        lambda features: np.asarray(model.embed_image(jnp.asarray(features))),
    )


def vtfn_model(config: ml_collections.ConfigDict, data: VtfnData) -> VTFN:
    """The VTFN model of ``config``, word vectors from ``model.glove`` when it names some."""
    init = glove.initial_word_vectors(config, data.vocab)
    return build_model(config, len(data.vocab), data.image_dim, init)


def make_batch_fn(split: CaptionSplit, pivot: bool):
    """Captions with their images' feature rows (``features_rows``: indices into the
    ``features`` table, gathered on the host or in the step; see ``training_batches``)
    and, for the pivot loss, other captions of them."""
    corpus = split.corpus

    def make_batch(
        rows: np.ndarray, draws: np.ndarray, width: int | None = None
    ) -> dict[str, np.ndarray]:
        images = corpus.image_index[rows].astype(np.int32)
        ids, mask = corpus.tokens(rows, width)
        batch = {"ids": ids, "mask": mask, rows_key("features"): images, "group": images}
        if pivot:
            other = corpus.other_captions(rows, draws)
            batch["pivot_ids"], batch["pivot_mask"] = corpus.tokens(other, width)
        return batch

    return make_batch


def training_batches(split: CaptionSplit, pivot: bool, length_buckets: int = 0) -> Batches:
    """The training captions' batches, indexing the split's image features as a table
    (capsim.data.device_tables): the Trainer keeps it on the device when it fits."""
    return Batches(
        len(split.corpus),
        make_batch_fn(split, pivot),
        length_buckets=split.corpus.length_buckets(length_buckets, with_other_captions=pivot),
        tables={"features": split.features},
    )


def vtfn_task(config: ml_collections.ConfigDict, data: VtfnData) -> Task:
    """The text tower and W, trained on the training captions' image features."""
    pivot = config.loss.pivot_weight > 0
    return Task(
        subject_of=lambda model: data.subject(*vtfn_embedders(model, data)),
        model=vtfn_model(config, data),
        loss_fn=make_loss_fn(config),
        batches=training_batches(data.splits["train"], pivot, config.data.get("length_buckets", 0)),
    )


def load_vtfn(config: ml_collections.ConfigDict, workdir: Path, data: VtfnData) -> VTFN:
    model = vtfn_model(config, data)
    restore_model(workdir, model)
    return model


def _word_vectors(embedder: Embedder, data: VtfnData) -> Embedders:
    return embedder, None


KINDS: dict[str, Kind] = {
    "vtfn": Kind(vtfn_task, load_vtfn, vtfn_embedders),
    "glove_avg": Kind(glove_average.task, glove_average.load, _word_vectors),
    "word2vec": Kind(word2vec.task, word2vec.load, _word_vectors),
    "pure_text_rnn": Kind(
        functools.partial(language_models.task, with_image=False),
        functools.partial(language_models.load, with_image=False),
        language_models.embedders,
    ),
    "pin_model_a": Kind(
        functools.partial(language_models.task, with_image=True),
        functools.partial(language_models.load, with_image=True),
        language_models.embedders,
    ),
}


def kind_of(config: ml_collections.ConfigDict) -> Kind:
    """The declaration of ``config.model.kind``; KeyError naming the known kinds."""
    if config.model.kind not in KINDS:
        raise KeyError(f"unknown model.kind {config.model.kind!r}; known: {sorted(KINDS)}")
    return KINDS[config.model.kind]


def load_embedders(config: ml_collections.ConfigDict, workdir: Path, data: VtfnData) -> Embedders:
    """(text embedder, image embedder or None) of the trained kind in ``workdir``."""
    kind = kind_of(config)
    return kind.embedders(kind.load(config, workdir, data), data)
