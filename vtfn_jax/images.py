"""Image files for feature extraction: listing a folder, the id of each file, decoding."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from capsim.errors import DataFormatError, FeatureError
from vtfn_jax.coco_labels import coco_image_id

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
ID_STYLES = ("filename", "stem", "coco")


def image_id_for(path: Path, id_style: str) -> str:
    """The image id a caption corpus uses for this file.

    ``filename`` keeps the name (Flickr8k ids), ``stem`` drops the extension,
    ``coco`` takes the number (``COCO_val2014_000000000139.jpg`` -> ``139``).
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
    raise ValueError(f"id_style must be one of {ID_STYLES}, got {id_style!r}")


def list_images(image_dir: Path, id_style: str) -> list[tuple[str, Path]]:
    """(image id, path) of every .jpg/.jpeg/.png directly in ``image_dir``, sorted by file name."""
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
    return list(path_of.items())


def load_image(path: Path, image_size: int) -> np.ndarray:
    """RGB pixels in [0, 255], center-cropped to a square and resized to image_size."""
    from PIL import Image

    try:
        with Image.open(path) as opened:
            image = opened.convert("RGB")
    except (OSError, ValueError, Image.DecompressionBombError) as error:
        raise DataFormatError(path, f"cannot read image: {error}") from error
    width, height = image.size
    side = min(width, height)
    left, top = (width - side) // 2, (height - side) // 2
    image = image.crop((left, top, left + side, top + side))
    image = image.resize((image_size, image_size), Image.Resampling.BILINEAR)
    return np.asarray(image, dtype=np.float32)
