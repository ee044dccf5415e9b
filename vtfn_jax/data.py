"""VTFN's data: captions with frozen image features, split by image.

Images are split three ways, drawn by ``data.seed``: train (the model sees their
captions and features), dev (early stopping) and test (same/different-image pairs and
retrieval). Captions come from the shapes world (its own splits and features)
or from the named caption sources both papers share (``data.sources``,
capsim.data.sources.SOURCES) plus a feature store keyed by the same photo keys:
COCO object labels (a coarse, real image-derived stand-in; every result on it
says so) or user-extracted CNN features in the FeatureStore layout.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from pathlib import Path

import ml_collections
import numpy as np

from capsim.data import corpus as corpus_lib
from capsim.data import glove
from capsim.data.records import CaptionRecord
from capsim.eval.evaluators import Subject
from capsim.text import Vocab, tokenize
from vtfn_jax.coco_labels import coco_object_label_features
from vtfn_jax.embedders import DEFAULT_BATCH_SIZE, Embedder, encode_sentences
from vtfn_jax.features import FeatureStore, align_captions
from vtfn_jax.pca import Pca, fit_pca

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
# Image features -> vectors in the sentence space (VTFN's W; the baselines have none).
ImageEmbed = Callable[[np.ndarray], np.ndarray]


@dataclasses.dataclass
class VtfnData:
    vocab: Vocab
    splits: dict[str, corpus_lib.CaptionSplit]
    feature_source: str
    records: dict[str, list[CaptionRecord]]
    world: object | None = None  # the ShapesWorld, for its evaluation sets
    pca: Pca | None = None

    @property
    def image_dim(self) -> int:
        return self.splits["train"].features.shape[1]

    def subject(self, text: Embedder, images: ImageEmbed | None = None) -> Subject:
        """A trained kind on this data as the evaluators see it, embedding as
        ``SentenceEncoder.encode`` does; held-out sets go in larger batches than its
        default (the vectors are the same)."""
        return Subject(
            embed=functools.partial(encode_sentences, text, batch_size=DEFAULT_BATCH_SIZE),
            embed_images=images,
            splits=self.splits,
            world=self.world,
        )


def _feature_store(config: ml_collections.ConfigDict) -> FeatureStore:
    data = config.data
    root = Path(data.data_dir).expanduser()
    if data.features == "coco_object_labels":
        return coco_object_label_features(root / data.object_labels, idf=data.object_labels_idf)
    return FeatureStore.load(Path(data.features).expanduser())


def _split_records(config: ml_collections.ConfigDict):
    """Caption records per split, the feature store, and the world (shapes only)."""
    data = config.data
    world = corpus_lib.generated_world(data)
    if world is not None:  # its own splits and features
        store = FeatureStore.from_arrays(world.image_ids, world.features, "shapes world features")
        by_split = {"train": "train", "dev": "val", "test": "test"}
        records = {s: [r for r in world.captions if r.split == by_split[s]] for s in SPLITS}
        return records, store, world
    store = _feature_store(config)
    merged, counts = corpus_lib.read_sources(data)
    kept, _, report = align_captions(merged, store)
    logger.info(
        "sources %s: %d captions once each; with features (%s): %s",
        counts,
        len(merged),
        store.source,
        report,
    )
    # data.seed, not the training's config.seed: every training seed tests on the same images
    rest, test = corpus_lib.hold_out_images(kept, data.test_images, data.seed)
    train, dev = corpus_lib.hold_out_images(rest, data.dev_images, data.seed + 1)
    train = corpus_lib.without_karpathy_test(train, data)
    return {"train": train, "dev": dev, "test": test}, store, None


def one_caption_per_image(records: list[CaptionRecord], seed: int) -> list[CaptionRecord]:
    """Keeps one fixed caption per image, so the image cannot pivot between captions."""
    rng = np.random.default_rng(seed)
    by_image: dict[str, list[CaptionRecord]] = {}
    for record in records:
        by_image.setdefault(record.image_id, []).append(record)
    return [group[rng.integers(len(group))] for _, group in sorted(by_image.items())]


def keep_fraction_of_images(
    records: list[CaptionRecord], fraction: float, seed: int
) -> list[CaptionRecord]:
    """The captions of the first ``fraction`` of the images in one seeded order, so a
    smaller fraction's images are a subset of a larger one's (the data-scale curve)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"data.train_fraction must be in (0, 1], got {fraction}")
    image_ids = sorted({r.image_id for r in records})
    order = np.random.default_rng(seed).permutation(len(image_ids))
    kept = {image_ids[i] for i in order[: max(1, round(fraction * len(image_ids)))]}
    return [r for r in records if r.image_id in kept]


TRAIN_LEVELS = ("sentence", "word")


def words_as_captions(records: list[CaptionRecord]) -> list[CaptionRecord]:
    """Word-level training (the VTFN paper's section 5.4): each word of a caption (a token
    with a letter or digit; punctuation is no word) becomes a caption of its own for the
    caption's image, so the tower learns word vectors against the image alone and a
    sentence is their aggregate only at evaluation."""
    return [
        dataclasses.replace(record, caption_id=f"{record.caption_id}/{k}", text=word)
        for record in records
        for k, word in enumerate(w for w in tokenize(record.text) if _is_word(w))
    ]


def _is_word(token: str) -> bool:
    return any(character.isalnum() for character in token)


def build_vocab(config: ml_collections.ConfigDict, train: list[CaptionRecord]) -> Vocab:
    """The training captions' words; a GloVe-initialised tower (``model.glove_words``)
    adds GloVe's words, so evaluation text keeps GloVe's vectors for them."""
    vocab = corpus_lib.build_vocab(train, config.data.min_count, config.data.max_vocab)
    model = config.get("model") or {}
    if model.get("glove") and model.get("glove_words", 0):
        vocab = glove.with_glove_words(vocab, glove.glove_words(model.glove), model.glove_words)
    return vocab


def prepare_data(config: ml_collections.ConfigDict) -> VtfnData:
    """Reads, splits, encodes and attaches features, deterministically from the config."""
    data = config.data
    records, store, world = _split_records(config)
    if data.get("train_fraction", 1.0) < 1:
        records["train"] = keep_fraction_of_images(
            records["train"], data.train_fraction, config.seed + 2
        )
    if data.captions_per_image == "one":
        records["train"] = one_caption_per_image(records["train"], config.seed)
    elif data.captions_per_image != "all":
        raise ValueError(
            f"data.captions_per_image must be 'one' or 'all', got {data.captions_per_image!r}"
        )
    level = data.get("train_level", "sentence")
    if level not in TRAIN_LEVELS:
        raise ValueError(f"data.train_level must be one of {TRAIN_LEVELS}, got {level!r}")
    vocab = build_vocab(config, records["train"])
    examples = words_as_captions(records["train"]) if level == "word" else records["train"]
    train_corpus = corpus_lib.encode_corpus(examples, vocab, data.max_len)
    train_features = store.lookup(train_corpus.image_ids)
    pca = fit_pca(train_features, data.pca_dim) if data.pca_dim else None

    def features_of(image_ids: list[str]) -> np.ndarray:
        features = store.lookup(image_ids)
        return pca.transform(features) if pca else features

    splits = {"train": corpus_lib.CaptionSplit(train_corpus, features_of(train_corpus.image_ids))}
    for name in ("dev", "test"):
        encoded = corpus_lib.encode_corpus(records[name], vocab, data.max_len)
        splits[name] = corpus_lib.CaptionSplit(encoded, features_of(encoded.image_ids))
    logger.info(
        "VTFN data: vocabulary %d; %s; features %s (%d-d%s)",
        len(vocab),
        ", ".join(
            f"{s} {len(splits[s].corpus)} captions / {len(splits[s].features)} images"
            for s in SPLITS
        ),
        store.source,
        store.dim,
        f", PCA to {data.pca_dim}" if pca else "",
    )
    return VtfnData(vocab, splits, store.source, records, world, pca)
