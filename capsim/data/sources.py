"""The named caption sources a config can train on (``config.data.sources``).

The registry of sources (each a folder layout and its reader in
capsim.data.captions), the dev sets, and the two rules
that keep evaluation text out of training, enforced here rather than trusted
to the data:

* a Flickr30k folder that holds a Flickr8k **test** photo (Flickr8k-Expert
  judges their captions) is refused, naming the file, line and image; so is
  one whose caption equals a Flickr8k test caption, when Flickr8k is at hand;
* a COCO Karpathy ``test`` split is refused as training data, naming an image
  (``capsim.data.corpus``), and the captions of its 5,000 images (captioning
  papers report on them; THumB judges them) are dropped from every COCO source
  by default (``drop_karpathy_test``; ``data.keep_karpathy_test`` keeps them).

``merge`` trains on each caption once when sources overlap (Flickr8k is a
subset of Flickr30k, val2017 of val2014): images are keyed by their photo
(``flickr/<photo id>``, the COCO id) and captions compared after lower-casing
and dropping punctuation.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from capsim.data import tfds_coco
from capsim.data.captions import (
    iter_lines,
    read_cc3m_tsv,
    read_coco_captions,
    read_coco_lines,
    read_flickr8k_dir,
    read_karpathy,
    read_multi30k,
)
from capsim.data.records import CaptionRecord
from capsim.errors import DataFormatError

_PUNCTUATION = re.compile(r"[^\w\s]")
_SPACES = re.compile(r"\s+")
_FLICKR8K_TEST_PHOTOS = Path(__file__).with_name("flickr8k_test_photos.txt")
# COCO ids of the Karpathy test split's 5,000 val2014 images, from Karpathy & Fei-Fei's
# split as Up-Down-Captioner's data/coco_splits/karpathy_test_images.txt lists it (MIT).
_KARPATHY_COCO_TEST_IMAGES = Path(__file__).with_name("karpathy_coco_test_images.txt")
# Sources whose captions have no image beside them: each row is an image of its own.
SINGLE_CAPTION_PREFIXES = ("cc3m/", "coco_line/")


def normalize(caption: str) -> str:
    """Lower case, punctuation dropped, single spaces: the rule duplicates are found by."""
    return _SPACES.sub(" ", _PUNCTUATION.sub(" ", caption.lower())).strip()


def photo_key(image_id: str) -> str:
    """One key per photo across corpora: ``flickr/<photo id>`` for Flickr8k/30k, else the id.

    Flickr8k names a photo ``<photo id>_<secret>.jpg``, Flickr30k ``<photo id>.jpg``.
    """
    corpus, _, name = image_id.partition("/")
    if corpus in ("flickr8k", "flickr30k"):
        return "flickr/" + name.split("_")[0].split(".")[0]
    return image_id


@functools.cache
def flickr8k_test_photos() -> frozenset[str]:
    """Photo ids of the 1,000 Flickr8k test images (shipped, so the guard needs no download)."""
    return frozenset(_FLICKR8K_TEST_PHOTOS.read_text().split())


@functools.cache
def karpathy_coco_test_images() -> frozenset[str]:
    """COCO ids of the Karpathy test split's images (shipped, so the guard works anywhere)."""
    return frozenset(_KARPATHY_COCO_TEST_IMAGES.read_text().split())


def drop_karpathy_test(
    records: Sequence[CaptionRecord], keep: bool = False
) -> tuple[list[CaptionRecord], int]:
    """Training captions without those of Karpathy COCO test images, and how many went.

    COCO records carry the bare COCO id (``read_coco_captions``, ``read_karpathy``,
    ``read_coco_lines`` with ids); other corpora prefix theirs. ``keep`` returns all.
    """
    if keep:
        return list(records), 0
    test = karpathy_coco_test_images()
    kept = [r for r in records if r.image_id not in test]
    return kept, len(records) - len(kept)


def check_no_flickr8k_test(
    folder: str | Path, test_captions: Iterable[str] = (), splits: Sequence[str] | None = None
) -> None:
    """Refuses a Flickr30k folder holding a Flickr8k test photo, or one of its captions
    (``test_captions``, compared normalised), in any of its ``*_images.txt`` splits."""
    folder = Path(folder)
    photos = flickr8k_test_photos()
    judged = {normalize(c) for c in test_captions}
    for images_file in sorted(folder.glob("*_images.txt")):
        split = images_file.name.removesuffix("_images.txt")
        if splits is not None and split not in splits:
            continue
        for number, line in iter_lines(images_file):
            if photo_key(f"flickr30k/{line.strip()}").removeprefix("flickr/") in photos:
                raise DataFormatError(
                    images_file,
                    f"image {line.strip()!r} is a Flickr8k test image: Flickr8k-Expert judges "
                    "its captions, so this folder must not be trained on (remove the image and "
                    "its captions, as extra_captions/README describes)",
                    number,
                )
        if judged:
            for record in read_multi30k(folder, split):
                if normalize(record.text) in judged:
                    raise DataFormatError(
                        folder / f"{split}.{record.caption_id[-1]}.en",
                        f"image {record.image_id.partition('/')[2]!r} has a caption of a "
                        f"Flickr8k test image ({record.text!r}): refused for training",
                    )


@dataclasses.dataclass(frozen=True)
class Source:
    """A named caption source and how to read it.

    ``read(location, options)`` gets the first of ``folders`` that exists under
    ``data_dir``, or, for a TFDS dataset (no ``folders``), ``options["tfds_data_dir"]``.
    ``options`` are the data config's ``tfds_data_dir``, ``karpathy_splits`` and
    ``shapes_world``. A generated source has ``world(options)``: the world its
    captions come from, with its own train/val/test splits, image features and
    evaluation sets, which runs on it use instead of drawing held-out images.
    """

    folders: tuple[str, ...]
    read: Callable[[Path | str, Mapping[str, Any]], list[CaptionRecord]]
    licence: str
    world: Callable[[Mapping[str, Any]], Any] | None = None


def _flickr8k(*splits: str) -> Callable[[Path, Mapping[str, Any]], list[CaptionRecord]]:
    """Flickr8k's ``splits``; never ``test``, whose images Flickr8k-Expert judges."""
    assert "test" not in splits

    def read(folder: Path, options: Mapping[str, Any]) -> list[CaptionRecord]:
        return [
            dataclasses.replace(r, image_id=f"flickr8k/{r.image_id}")
            for r in read_flickr8k_dir(folder)
            if r.split in splits
        ]

    return read


def _flickr30k(*splits: str) -> Callable[[Path, Mapping[str, Any]], list[CaptionRecord]]:
    def read(folder: Path, options: Mapping[str, Any]) -> list[CaptionRecord]:
        check_no_flickr8k_test(folder)
        return [r for split in splits for r in read_multi30k(folder, split)]

    return read


def _read_all(pattern: str, reader: Callable[[Path], list[CaptionRecord]]):
    def read(folder: Path, options: Mapping[str, Any]) -> list[CaptionRecord]:
        paths = sorted(folder.glob(pattern))
        if not paths:
            raise DataFormatError(folder, f"no {pattern} file here")
        return [record for path in paths for record in reader(path)]

    return read


KARPATHY_VAL_LIST = "karpathy_val_images.txt"


def karpathy_val_images(path: Path) -> frozenset[str]:
    """COCO ids of a Karpathy val image list: ``PATH COCO_ID`` a line (Up-Down-Captioner's
    data/coco_splits format, as ``coco/karpathy_val_images.txt`` under the data holds it)."""
    if not path.is_file():
        raise DataFormatError(
            path,
            "missing: source 'coco_train' keeps the Karpathy train images of the COCO captions "
            "beside it, so it needs the Karpathy val list (docs/data.md)",
        )
    ids = set()
    for number, line in iter_lines(path):
        fields = line.split()
        if len(fields) != 2 or not fields[1].isdigit():
            raise DataFormatError(path, f"expected 'PATH COCO_ID', got {line!r}", number)
        ids.add(fields[1])
    return frozenset(ids)


def _coco_train_split(folder: Path, options: Mapping[str, Any]) -> list[CaptionRecord]:
    """``coco``'s captions of Karpathy train (and restval) images: those of the val images
    the folder's list names go; the test images go by the rule of every COCO source."""
    val = karpathy_val_images(folder / KARPATHY_VAL_LIST)
    return [
        r
        for r in _read_all("captions_*.json", read_coco_captions)(folder, options)
        if r.image_id not in val
    ]


def _training_splits(options: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(options.get("karpathy_splits") or tfds_coco.TRAINING_SPLITS)


def _karpathy_json(folder: Path, options: Mapping[str, Any]) -> list[CaptionRecord]:
    """Karpathy's ``dataset_coco.json`` (``data.karpathy_splits``); its test split refused."""
    path = folder / KARPATHY_JSON
    records = read_karpathy(path)
    splits = _training_splits(options)
    if tfds_coco.EVALUATION_SPLIT in splits:
        example = next((r.image_id for r in records if r.split == "test"), "none here")
        raise DataFormatError(
            path,
            f"split 'test' (e.g. image {example}) is the Karpathy test split: captioning models "
            "are reported and caption metrics judged on it, so it must stay out of training",
        )
    return [r for r in records if r.split in splits]


def _coco_tfds(data_dir: str, options: Mapping[str, Any]) -> list[CaptionRecord]:
    return tfds_coco.read_captions(str(data_dir), _training_splits(options))


@functools.cache
def _generated_world(config: Any) -> Any:
    from capsim.data.shapes_world import generate_world

    return generate_world(config)


def shapes_world(options: Mapping[str, Any]) -> Any:
    """The shapes world of ``options["shapes_world"]`` (ShapesWorldConfig's keys, e.g.
    num_scenes and seed), built once per process: its captions, features and
    evaluation sets are read from the same object."""
    from capsim.data.shapes_world import ShapesWorldConfig

    return _generated_world(ShapesWorldConfig(**(options.get("shapes_world") or {})))


def _shapes_world_captions(location: Path | str, options: Mapping[str, Any]) -> list[CaptionRecord]:
    return list(shapes_world(options).captions)


FLICKR8K_TERMS = "Flickr8k terms: research only (University of Illinois request form)"
FLICKR30K_TERMS = "Flickr30k terms: non-commercial research and education only"
FLICKR30K_FOLDERS = ("extra_captions/flickr30k", "flickr30k")
COCO_TERMS = "CC BY 4.0 (COCO)"
KARPATHY_JSON = "dataset_coco.json"
SOURCES: dict[str, Source] = {
    "coco": Source(("coco",), _read_all("captions_*.json", read_coco_captions), COCO_TERMS),
    # the same captions less the Karpathy val images' (I2CE Table 1's "train split")
    "coco_train": Source(("coco",), _coco_train_split, COCO_TERMS),
    # Karpathy's COCO splits (train + restval by default): his JSON, or a prepared TFDS copy
    "coco_karpathy": Source(("coco",), _karpathy_json, COCO_TERMS),
    "coco_tfds": Source((), _coco_tfds, COCO_TERMS),
    "flickr8k": Source(("flickr8k",), _flickr8k("train"), FLICKR8K_TERMS),
    "flickr30k": Source(FLICKR30K_FOLDERS, _flickr30k("train"), FLICKR30K_TERMS),
    # every split but what is judged (Flickr8k test) or held out (Flickr30k val, dev_flickr)
    "flickr8k_all": Source(("flickr8k",), _flickr8k("train", "dev"), FLICKR8K_TERMS),
    "flickr30k_all": Source(FLICKR30K_FOLDERS, _flickr30k("train", "test_2016"), FLICKR30K_TERMS),
    "cc3m": Source(
        ("extra_captions/cc3m", "cc3m"), _read_all("*.tsv", read_cc3m_tsv), "any purpose (Google)"
    ),
    "coco_lines": Source(("extra_captions/coco",), _read_all("*.txt", read_coco_lines), COCO_TERMS),
    # more COCO caption JSON files, e.g. a val2014 subset beside val2017
    "coco_extra": Source(
        ("extra_captions/coco",), _read_all("captions_*.json", read_coco_captions), COCO_TERMS
    ),
    # the embedded synthetic world (docs/shapes_world.md), generated from data.shapes_world
    "shapes_world": Source((), _shapes_world_captions, "generated here: no terms", shapes_world),
}


def source_folder(name: str, data_dir: str | Path) -> Path:
    """The folder of source ``name`` under ``data_dir``; a clear error when it is missing."""
    if name not in SOURCES:
        raise KeyError(f"unknown caption source {name!r}; known: {sorted(SOURCES)}")
    root = Path(data_dir).expanduser()
    for folder in SOURCES[name].folders:
        if (root / folder).is_dir():
            return root / folder
    tried = ", ".join(str(root / f) for f in SOURCES[name].folders)
    raise FileNotFoundError(f"caption source {name!r}: none of {tried} exists")


def read_source(
    name: str, data_dir: str | Path, options: Mapping[str, Any] | None = None
) -> list[CaptionRecord]:
    """The captions of source ``name``; ``options``: ``tfds_data_dir``, ``karpathy_splits``."""
    options = options or {}
    if name in SOURCES and not SOURCES[name].folders:
        return SOURCES[name].read(options.get("tfds_data_dir", ""), options)
    return SOURCES[name].read(source_folder(name, data_dir), options)


def _dev_coco(data_dir: str | Path, options: Mapping[str, Any]) -> list[CaptionRecord]:
    return merge(read_source("coco", data_dir))


def _dev_coco_tfds(data_dir: str | Path, options: Mapping[str, Any]) -> list[CaptionRecord]:
    return tfds_coco.read_captions(options.get("tfds_data_dir", ""), ("val",))


def _dev_flickr(data_dir: str | Path, options: Mapping[str, Any]) -> list[CaptionRecord]:
    folder = source_folder("flickr30k", data_dir)
    check_no_flickr8k_test(folder)
    return merge(read_multi30k(folder, "val"))


# Held-out domains (``data.dev_sets``): the captions a dev split is drawn from, whichever
# sources are trained on, and whether ``data.dev_images`` of its images are drawn
# (capsim.data.corpus leaves every image of a dev set out of training).
DEV_SETS: dict[str, tuple[Callable[[str | Path, Mapping[str, Any]], list], bool]] = {
    "coco": (_dev_coco, True),  # images of the ``coco`` source
    "coco_tfds": (_dev_coco_tfds, True),  # images of the TFDS copy's Karpathy val split
    "flickr": (_dev_flickr, False),  # Flickr30k's val split, all of it
}


def dev_records(
    name: str, data_dir: str | Path, options: Mapping[str, Any] | None = None
) -> tuple[list[CaptionRecord], bool]:
    """The captions of dev set ``name`` and whether a draw of its images is held out."""
    if name not in DEV_SETS:
        raise KeyError(f"unknown dev set {name!r}; known: {sorted(DEV_SETS)}")
    read, drawn = DEV_SETS[name]
    return read(data_dir, options or {}), drawn


def merge(records: Iterable[CaptionRecord]) -> list[CaptionRecord]:
    """Each caption once: images keyed by photo (``photo_key``), a caption dropped when its
    image already has it, or, for a caption without an image of its own
    (``SINGLE_CAPTION_PREFIXES``), when any image has it. Order is kept."""
    records = list(records)
    single = [r.image_id.startswith(SINGLE_CAPTION_PREFIXES) for r in records]
    seen_pairs: set[tuple[str, str]] = set()
    seen_texts: set[str] = set()
    kept: dict[int, CaptionRecord] = {}
    for index, record in enumerate(records):  # captions of real images first
        if single[index]:
            continue
        image, text = photo_key(record.image_id), normalize(record.text)
        if (image, text) not in seen_pairs:
            seen_pairs.add((image, text))
            seen_texts.add(text)
            kept[index] = dataclasses.replace(record, image_id=image)
    for index, record in enumerate(records):
        text = normalize(record.text)
        if single[index] and text not in seen_texts:
            seen_texts.add(text)
            kept[index] = record
    return [kept[i] for i in sorted(kept)]
