"""Images for feature extraction: a folder of files or a prepared TFDS ``coco_captions``.

Either way the result is an :class:`Images`: each image's id (the photo key its
captions carry, so features and captions match) and how to read its pixels.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from capsim.data import tfds_coco
from capsim.data.sources import photo_key
from capsim.errors import DataFormatError, FeatureError
from vtfn_jax.coco_labels import coco_image_id

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
ID_STYLES = ("filename", "stem", "coco", "flickr")


@dataclasses.dataclass(frozen=True)
class Images:
    """Images to extract: ``(image id, ref)`` pairs, and ``read(ref)`` giving the encoded
    file (a path or bytes). ``describe(ref)`` names an image in errors and skip lists;
    ``id_style`` is recorded with the features, so a resumed run cannot mix styles."""

    where: str
    items: list[tuple[str, Any]]
    read: Callable[[Any], Path | bytes]
    describe: Callable[[Any], str]
    id_style: str


def image_id_for(path: Path, id_style: str) -> str:
    """The image id a caption corpus uses for this file.

    ``filename`` keeps the name, ``stem`` drops the extension, ``coco`` takes the
    number (``COCO_val2014_000000000139.jpg`` -> ``139``), ``flickr`` the photo key
    of a Flickr8k/30k file (``1000268201_693b08cb0e.jpg`` -> ``flickr/1000268201``),
    which is what caption sources key Flickr photos by.
    """
    if id_style == "filename":
        return path.name
    if id_style == "stem":
        return path.stem
    if id_style == "coco":
        image_id = coco_image_id(path.name)
        if image_id is None:
            raise DataFormatError(path, "no COCO image number in the file name")
        return image_id
    if id_style == "flickr":
        return photo_key(f"flickr30k/{path.name}")
    raise ValueError(f"id_style must be one of {ID_STYLES}, got {id_style!r}")


def folder_images(image_dir: str | Path, id_style: str) -> Images:
    """Every .jpg/.jpeg/.png directly in ``image_dir``, sorted by file name."""
    image_dir = Path(image_dir)
    if not image_dir.is_dir():
        raise FileNotFoundError(f"image folder {image_dir} does not exist")
    paths = sorted(
        path
        for path in image_dir.iterdir()
        if path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES
    )
    if not paths:
        raise DataFormatError(image_dir, f"no {'/'.join(IMAGE_SUFFIXES)} images")
    path_of: dict[str, Path] = {}
    for path in paths:
        image_id = image_id_for(path, id_style)
        if image_id in path_of:
            raise FeatureError(image_id, f"both {path_of[image_id]} and {path} map to this id")
        path_of[image_id] = path
    return Images(str(image_dir), list(path_of.items()), lambda path: path, str, id_style)


def tfds_images(data_dir: str, splits: Sequence[str]) -> Images:
    """The images of a prepared TFDS ``coco_captions``' ``splits``, keyed by COCO id
    (``image/id``, as its captions are), read as JPEG bytes from the same records."""
    builder = tfds_coco.open_builder(data_dir)
    sources = {split: tfds_coco.open_split(builder, split) for split in splits}
    items, seen = [], set()
    for split in splits:
        for image in tfds_coco.read_images(builder, split):
            if image.image_id not in seen:
                seen.add(image.image_id)
                items.append((image.image_id, (split, image.index)))

    def read(ref: tuple[str, int]) -> bytes:
        return sources[ref[0]][ref[1]]["image"]

    def describe(ref: tuple[str, int]) -> str:
        return f"{builder.data_dir} {ref[0]}[{ref[1]}]"

    return Images(str(builder.data_dir), items, read, describe, "coco (TFDS image/id)")


def load_image(file: Path | bytes, image_size: int, name: str | Path = "") -> np.ndarray:
    """RGB pixels in [0, 255], center-cropped to a square and resized to image_size.

    ``file`` is a path or encoded bytes; an unreadable one raises DataFormatError
    naming ``name`` (the path by default)."""
    from PIL import Image

    name = name or file
    try:
        with Image.open(io.BytesIO(file) if isinstance(file, bytes) else file) as opened:
            image = opened.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        raise DataFormatError(name, f"cannot read image: {error}") from error
    width, height = image.size
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    image = image.crop((left, top, left + side, top + side))
    image = image.resize((image_size, image_size), Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=np.float32)
