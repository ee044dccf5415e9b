"""I2CE's captions: the training corpus and dev splits, and how they become batches.

Each batch row is an anchor caption with a second caption of its image (the
semantic branches' positive); i2ce_jax.train declares the model that learns from them.
"""

from __future__ import annotations

import dataclasses
import logging

import ml_collections
import numpy as np

from capsim import text
from capsim.data import corpus as corpus_lib
from capsim.data.pipeline import Batches
from capsim.data.records import CaptionRecord
from capsim.eval.long_caption_pairs import COLOURS, NUMBERS, OBJECTS


def load_corpora(
    config: ml_collections.ConfigDict,
) -> tuple[list[CaptionRecord], dict[str, list[CaptionRecord]], object | None]:
    """Training captions, the dev splits (for early stopping) and the shapes world, if used.

    The named ``data.sources`` give one dev split per ``data.dev_sets`` entry
    (``dev_coco``, ``dev_flickr``); without dev sets, ``dev`` is ``data.dev_images``
    images of the training captions, or the shapes world's own ``val`` split
    (capsim.data.corpus.load_sources). The draws follow ``data.seed``, never the
    training's ``config.seed``: a second training seed holds out the first one's images.
    """
    train, dev = corpus_lib.load_sources(config.data)
    return train, dev, corpus_lib.generated_world(config.data)


@dataclasses.dataclass(frozen=True)
class WordSwaps:
    """Which word ids a contrast negative may swap, and for what: a colour for another
    colour, a number word for another number, a COCO category's noun for another
    category's (the word lists of capsim.eval.long_caption_pairs, one-token words only).

    ``kind[id]`` is 0 (colour), 1 (number), 2 (object) or -1 (not swapped); ``category[id]``
    tells objects' categories apart; ``pools[kind]`` lists that kind's ids.
    """

    kind: np.ndarray
    category: np.ndarray
    pools: tuple[np.ndarray, ...]

    @classmethod
    def of(cls, vocab: text.Vocab) -> WordSwaps:
        kind = np.full(len(vocab), -1, np.int64)
        category = np.full(len(vocab), -1, np.int64)
        objects = {w: c for c, (_, words) in enumerate(OBJECTS.items()) for w in words}
        lists = (COLOURS, NUMBERS, tuple(objects))
        pools = []
        for k, words in enumerate(lists):
            ids = [vocab.stoi[w] for w in words if " " not in w and w in vocab.stoi]
            kind[ids] = k
            category[ids] = [objects.get(vocab.itos[i], i) for i in ids]
            pools.append(np.array(ids, np.int64))
        return cls(kind, category, tuple(pools))

    def contrast(self, ids: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A copy of ``ids`` [B, L] with one swappable word of each row swapped; a row with
        none comes back unchanged (``swapped`` tells them apart)."""
        out = ids.copy()
        for row in range(len(ids)):
            where = np.flatnonzero(self.kind[ids[row]] >= 0)
            if where.size == 0:
                continue
            at = where[rng.integers(where.size)]
            word = ids[row, at]
            pool = self.pools[self.kind[word]]
            options = pool[self.category[pool] != self.category[word]]
            if options.size:
                out[row, at] = options[rng.integers(options.size)]
        return out


def make_batch_fn(corpus: corpus_lib.EncodedCorpus, swaps: WordSwaps | None = None):
    """Anchor captions plus a different caption of the same image each; with ``swaps``,
    also each anchor with one word swapped (``contrast_ids``/``contrast_mask``, the mask
    empty where no word could be swapped): a negative of its own (``config.loss.contrast``).

    A caption whose image has no other (a Conceptual Captions row, say) is paired with
    itself, and its ``group`` is written as ``-1 - image``: it serves reconstruction and
    negatives, never as its own positive (i2ce_jax.model.semantic_positives). The flag
    rides in ``group`` rather than in an array of its own: a second per-row array in the
    global batch broke the 2-process gloo step (a collective mismatch,
    tests/test_multihost.py).

    The token rows are gathered here on the host, not kept as device tables
    (capsim.data.device_tables) as VTFN's features are: a batch of 1,024 is about
    200 KB, built in 0.4 ms on one core (0.3 ms of it the token gathers), far below a
    step; bench/throughput_tables/input_wait.py times the loop against its step.
    """

    def make_batch(
        rows: np.ndarray, draws: np.ndarray, width: int | None = None
    ) -> dict[str, np.ndarray]:
        anchor_ids, anchor_mask = corpus.tokens(rows, width)
        similar = corpus.other_captions(rows, draws)
        similar_ids, similar_mask = corpus.tokens(similar, width)
        image = corpus.image_index[rows]
        batch = {
            "anchor_ids": anchor_ids,
            "anchor_mask": anchor_mask,
            "similar_ids": similar_ids,
            "similar_mask": similar_mask,
            "group": np.where(similar != rows, image, -1 - image).astype(image.dtype),
        }
        if swaps is not None:  # the draws seed the swaps: a resumed run makes the same
            rng = np.random.default_rng(np.frombuffer(np.asarray(draws).tobytes(), np.uint32))
            contrast = swaps.contrast(anchor_ids, rng)
            swapped = np.any(contrast != anchor_ids, axis=1)
            batch["contrast_ids"] = contrast
            batch["contrast_mask"] = anchor_mask & swapped[:, None]
        return batch

    return make_batch


# Losses that read every row's diagonal pair as a positive and cannot leave one out.
DIAGONAL_POSITIVE_LOSSES = ("pearson", "covariance", "kendall")


def single_caption_images(corpus: corpus_lib.EncodedCorpus) -> int:
    """How many images of ``corpus`` have one caption (no same-image positive)."""
    return int(np.sum(np.bincount(corpus.image_index) == 1))


def _check_positives(config: ml_collections.ConfigDict, train: corpus_lib.EncodedCorpus) -> None:
    """A caption without a second caption of its image must not become its own positive."""
    singles = single_caption_images(train)
    if singles and config.loss.name in DIAGONAL_POSITIVE_LOSSES:
        raise ValueError(
            f"loss {config.loss.name!r} takes every caption's pair with a second caption of "
            f"its image as a positive, but {singles} training images have one caption (e.g. "
            "Conceptual Captions rows); use infonce, triplet, rank or margin, or drop those sources"
        )


def encoded_corpora(
    config: ml_collections.ConfigDict,
) -> tuple[text.Vocab, corpus_lib.EncodedCorpus, dict[str, corpus_lib.CaptionSplit], object]:
    """(vocabulary, encoded training captions, encoded dev splits, shapes world or None)."""
    train_records, dev_splits, world = load_corpora(config)
    data = config.data
    vocab = corpus_lib.build_vocab(train_records, data.min_count, data.max_vocab)
    train = corpus_lib.encode_corpus(train_records, vocab, data.max_len)
    dev = {
        name: corpus_lib.CaptionSplit(corpus_lib.encode_corpus(records, vocab, data.max_len))
        for name, records in dev_splits.items()
    }
    logging.info(
        "vocabulary %d, %d training captions of %d images, dev captions %s",
        len(vocab),
        len(train),
        len(train.image_ids),
        {name: len(split.corpus) for name, split in dev.items()},
    )
    _check_positives(config, train)
    return vocab, train, dev, world


def training_batches(
    config: ml_collections.ConfigDict,
    train: corpus_lib.EncodedCorpus,
    vocab: text.Vocab | None = None,
) -> Batches:
    """The training batches: length-bucketed with ``data.length_buckets``, in runs of
    captions sharing a content word (hard negatives) with ``data.topic_clusters``, with
    word-swapped anchors when ``loss.contrast`` is on (which needs the ``vocab``)."""
    swaps = None
    if config.get("loss", {}).get("contrast", False):
        if vocab is None:
            raise ValueError("config.loss.contrast swaps words: training_batches needs the vocab")
        swaps = WordSwaps.of(vocab)
    return Batches(
        len(train),
        make_batch_fn(train, swaps),
        length_buckets=train.length_buckets(
            config.data.get("length_buckets", 0), with_other_captions=True
        ),
        topic_clusters=train.topic_clusters(config.data.get("topic_clusters", 0)),
    )
