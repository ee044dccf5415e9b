"""Caption corpora for training: gather sources, hold out dev images, encode.

Both papers train on captions grouped by image, so this is the one place that
reads the configured caption sources (capsim.data.sources.SOURCES), keeps
evaluation images out, builds the vocabulary and turns text into padded id arrays.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import ml_collections
import numpy as np

from capsim import text
from capsim.data import captions, pipeline, sources
from capsim.data.records import CaptionRecord
from capsim.errors import DataFormatError

FLICKR8K_EVAL_SPLIT = "test"
TOPIC_MAX_SHARE = 0.05  # a word in more captions than this is no topic (see topic_clusters)


def source_options(data: ml_collections.ConfigDict) -> dict:
    """What a source reads beside ``data_dir`` (capsim.data.sources.read_source)."""
    world = data.get("shapes_world")
    return {
        "tfds_data_dir": data.get("tfds_data_dir", ""),
        "karpathy_splits": tuple(data.get("karpathy_splits", ())),
        "shapes_world": dict(world) if world else {},
    }


def generated_world(data: ml_collections.ConfigDict) -> Any:
    """The world of a generated source in ``data.sources`` (the shapes world), or None.

    Its captions come split and its images have features of their own, so it is
    trained on alone: naming it beside another source is refused.
    """
    names = tuple(data.get("sources", ()))
    generated = [name for name in names if name in sources.SOURCES and sources.SOURCES[name].world]
    if not generated:
        return None
    if len(names) > 1:
        raise ValueError(
            f"config.data.sources {list(names)}: {generated[0]!r} is a generated world with its "
            "own splits and image features, so it is trained on alone"
        )
    return sources.SOURCES[generated[0]].world(source_options(data))


def read_sources(
    data: ml_collections.ConfigDict, names: Sequence[str] | None = None
) -> tuple[list[CaptionRecord], dict[str, int]]:
    """Each caption once across the named sources (``data.sources`` by default), images
    keyed by photo (capsim.data.sources.merge), and how many captions each source gave."""
    names = tuple(data.sources if names is None else names)
    if not names:
        raise ValueError(
            f"config.data.sources names no caption source; known: {sorted(sources.SOURCES)}"
        )
    root = Path(data.data_dir).expanduser()
    if any(n.startswith("flickr30k") for n in names):
        _check_flickr30k_against_flickr8k_test(root)
    read = {name: sources.read_source(name, root, source_options(data)) for name in names}
    merged = sources.merge(r for records in read.values() for r in records)
    return merged, {name: len(records) for name, records in read.items()}


def load_sources(
    data: ml_collections.ConfigDict,
) -> tuple[list[CaptionRecord], dict[str, list[CaptionRecord]]]:
    """Training captions of the named ``data.sources`` and the held-out dev splits.

    Each ``data.dev_sets`` domain gives ``dev_<name>`` (capsim.data.sources.DEV_SETS),
    the same for any mixture, so runs on different mixtures compare on the same
    held-out captions; every image of a dev set is left out of training, whichever
    source brings it. Without dev sets, ``dev`` is ``data.dev_images`` images drawn
    from the training captions. Both draws are seeded by ``data.seed``, not the
    training's ``config.seed``, so runs of other training seeds hold out the same
    images. A generated world gives its own ``train`` and, as ``dev``, its ``val`` split.
    """
    world = generated_world(data)
    if world is not None:
        split = {name: [r for r in world.captions if r.split == name] for name in ("train", "val")}
        return split["train"], {"dev": split["val"]}
    root = Path(data.data_dir).expanduser()
    dev_sets = tuple(data.get("dev_sets", ()))
    if "flickr" in dev_sets and not any(n.startswith("flickr30k") for n in data.sources):
        _check_flickr30k_against_flickr8k_test(root)  # else read_sources checks it
    merged, counts = read_sources(data)
    dev = {}
    for name in dev_sets:
        records, drawn = sources.dev_records(name, root, source_options(data))
        dev[f"dev_{name}"] = (
            hold_out_images(records, data.dev_images, data.seed)[1] if drawn else records
        )
    held = {r.image_id for records in dev.values() for r in records}
    train = [r for r in merged if r.image_id not in held]
    if not dev_sets:
        train, dev["dev"] = hold_out_images(train, data.dev_images, data.seed)
    train = without_karpathy_test(train, data)
    logging.info(
        "sources %s: %d captions read, %d once each, %d trained on (%d images); dev %s",
        counts,
        sum(counts.values()),
        len(merged),
        len(train),
        len({r.image_id for r in train}),
        {name: len(records) for name, records in dev.items()},
    )
    if not train:
        raise ValueError(f"the sources {list(data.sources)} hold no training captions under {root}")
    return train, dev


def without_karpathy_test(
    train: Sequence[CaptionRecord], data: ml_collections.ConfigDict
) -> list[CaptionRecord]:
    """Training captions without those of Karpathy COCO test images, saying how many went
    (sources.drop_karpathy_test); ``data.keep_karpathy_test=True`` keeps them, and says so."""
    keep = data.get("keep_karpathy_test", False)
    kept, dropped = sources.drop_karpathy_test(train, keep)
    if dropped:
        images = len({r.image_id for r in train}) - len({r.image_id for r in kept})
        logging.warning(
            "dropped %d training captions of %d Karpathy COCO test images (captioning models "
            "are reported on them, THumB judges them); data.keep_karpathy_test=True keeps them",
            dropped,
            images,
        )
    elif keep:
        logging.warning("data.keep_karpathy_test=True: Karpathy COCO test images are trained on")
    return kept


def _check_flickr30k_against_flickr8k_test(root: Path) -> None:
    """The caption half of the Flickr30k rule, when Flickr8k's own files are at hand."""
    try:
        flickr8k = captions.read_flickr8k_dir(root / "flickr8k")
    except DataFormatError:
        return  # the photo-id half (a shipped list) still runs in the reader
    judged = [r.text for r in flickr8k if r.split == FLICKR8K_EVAL_SPLIT]
    sources.check_no_flickr8k_test(sources.source_folder("flickr30k", root), judged)


def hold_out_images(
    records: Sequence[CaptionRecord], num_images: int, seed: int
) -> tuple[list[CaptionRecord], list[CaptionRecord]]:
    """Splits off ``num_images`` random images (all their captions) as a dev set."""
    image_ids = sorted({r.image_id for r in records})
    if num_images >= len(image_ids):
        raise ValueError(f"cannot hold out {num_images} of {len(image_ids)} images")
    rng = np.random.default_rng(seed)
    held = set(rng.choice(image_ids, size=num_images, replace=False).tolist())
    train = [r for r in records if r.image_id not in held]
    dev = [r for r in records if r.image_id in held]
    return train, dev


def build_vocab(
    records: Sequence[CaptionRecord], min_count: int, max_size: int | None
) -> text.Vocab:
    return text.Vocab.build(
        (text.tokenize(r.text) for r in records), min_count=min_count, max_size=max_size or None
    )


@dataclasses.dataclass
class EncodedCorpus:
    """Captions as padded ids, with the image each belongs to.

    ``image_index[i]`` is the row of caption i's image in ``image_ids``;
    ``captions_of_image[k]`` lists the caption rows of image k.
    """

    records: list[CaptionRecord]
    ids: np.ndarray
    mask: np.ndarray
    image_index: np.ndarray
    image_ids: list[str]
    captions_of_image: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.records)

    def tokens(self, rows: np.ndarray, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(ids, mask) of ``rows``, cut to ``width`` positions (all of them with None)."""
        return self.ids[rows, :width], self.mask[rows, :width]

    def length_buckets(
        self, multiple: int, with_other_captions: bool = False
    ) -> pipeline.LengthBuckets | None:
        """Length-bucketed batches (``multiple`` > 0) or None (0). Each caption needs its
        own length, or with another caption of its image alongside (I2CE's similar
        caption, VTFN's pivot), the longest caption of that image."""
        if not isinstance(multiple, int) or multiple < 0:
            raise ValueError(
                f"config.data.length_buckets must be 0 (off) or a positive number of tokens "
                f"to round widths up to, got {multiple!r}"
            )
        if not multiple:
            return None
        widths = self.mask.sum(axis=1)
        if with_other_captions:
            longest = np.zeros(len(self.image_ids), widths.dtype)
            np.maximum.at(longest, self.image_index, widths)
            widths = longest[self.image_index]
        return pipeline.LengthBuckets(widths, multiple, self.ids.shape[1])

    def topic_clusters(
        self, size: int, max_share: float = TOPIC_MAX_SHARE
    ) -> pipeline.TopicClusters | None:
        """Hard-negative runs of ``size`` captions sharing a content word (0: None, off).

        A content word is any vocabulary word but the reserved ids that appears in at
        most ``max_share`` of the captions: "a", "the" and "man" are in too many to
        say what a caption is about.
        """
        if not isinstance(size, int) or size < 0:
            raise ValueError(
                f"config.data.topic_clusters must be 0 (off) or the number of captions per "
                f"run of a shared content word, got {size!r}"
            )
        if not size:
            return None
        ids = np.where(self.mask, self.ids, 0).astype(np.int64)
        num_ids = int(ids.max()) + 1
        rows = np.arange(len(ids))[:, None]
        in_caption = np.unique((rows * num_ids + ids).ravel()) % num_ids
        share = np.bincount(in_caption, minlength=num_ids) / len(ids)
        content = (share <= max_share) & (np.arange(num_ids) >= len(text.SPECIALS))
        return pipeline.TopicClusters(np.where(content[ids], ids, -1).astype(np.int32), size)

    def other_captions(self, rows: np.ndarray, draws: np.ndarray) -> np.ndarray:
        """For each row, a different caption of its image, picked by its draw in [0, 1).

        A row whose image has one caption gets itself. Vectorised over a batch:
        captions sorted by image, each row picks among its image's others by rank.
        """
        order, start, count, rank = self._by_image
        images = self.image_index[rows]
        others = count[images] - 1
        pick = np.minimum((np.asarray(draws) * np.maximum(others, 1)).astype(np.int64), others - 1)
        pick += pick >= rank[rows]  # skip the row itself
        chosen = order[start[images] + np.maximum(pick, 0)]
        return np.where(others > 0, chosen, rows)

    @functools.cached_property
    def _by_image(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Caption rows sorted by image; each image's first position and count; each row's rank."""
        order = np.argsort(self.image_index, kind="stable")
        count = np.bincount(self.image_index, minlength=len(self.image_ids))
        start = np.concatenate([[0], np.cumsum(count)[:-1]])
        rank = np.empty(len(order), np.int64)
        rank[order] = np.arange(len(order)) - start[self.image_index[order]]
        return order, start, count, rank

    def texts_by_image(self) -> dict[str, list[str]]:
        return {
            image_id: [self.records[i].text for i in rows]
            for image_id, rows in zip(self.image_ids, self.captions_of_image, strict=True)
        }


@dataclasses.dataclass
class CaptionSplit:
    """Encoded captions of one image split, with each image's feature row when there are images."""

    corpus: EncodedCorpus
    features: np.ndarray | None = None  # [len(corpus.image_ids), D], row k = image k


def encode_corpus(
    records: Sequence[CaptionRecord], vocab: text.Vocab, max_len: int
) -> EncodedCorpus:
    """Encodes training captions; over-long ones are truncated (and counted in the log)."""
    records = list(records)
    encoded = text.encode(
        vocab,
        [r.text for r in records],
        max_len,
        ids=[r.caption_id for r in records],
        too_long="truncate",
        allow_all_unknown=True,
    )
    truncated = int(np.sum(encoded.ids[:, -1] == text.EOS_ID))
    if truncated:
        logging.info("%d of %d captions reach max_len=%d", truncated, len(records), max_len)
    image_ids = sorted({r.image_id for r in records})
    row_of = {image_id: k for k, image_id in enumerate(image_ids)}
    image_index = np.array([row_of[r.image_id] for r in records], np.int32)
    order = np.argsort(image_index, kind="stable")
    bounds = np.searchsorted(image_index[order], np.arange(len(image_ids) + 1))
    groups = [order[bounds[k] : bounds[k + 1]] for k in range(len(image_ids))]
    return EncodedCorpus(records, encoded.ids, encoded.mask, image_index, image_ids, groups)
