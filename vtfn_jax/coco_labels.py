"""COCO object labels as image features: an 80-d multi-hot (optionally IDF-weighted) vector
per image, the one real image-derived signal shipped beside the captions. Results on it
say so: they are not CNN features."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from capsim.errors import DataFormatError
from vtfn_jax.features import FeatureStore

logger = logging.getLogger(__name__)

COCO_CATEGORIES = (
    "airplane", "apple", "backpack", "banana", "baseball_bat", "baseball_glove", "bear", "bed",
    "bench", "bicycle", "bird", "boat", "book", "bottle", "bowl", "broccoli", "bus", "cake", "car",
    "carrot", "cat", "cell_phone", "chair", "clock", "couch", "cow", "cup", "dining_table", "dog",
    "donut", "elephant", "fire_hydrant", "fork", "frisbee", "giraffe", "hair_drier", "handbag",
    "horse", "hot_dog", "keyboard", "kite", "knife", "laptop", "microwave", "motorcycle", "mouse",
    "orange", "oven", "parking_meter", "person", "pizza", "potted_plant", "refrigerator", "remote",
    "sandwich", "scissors", "sheep", "sink", "skateboard", "skis", "snowboard", "spoon",
    "sports_ball", "stop_sign", "suitcase", "surfboard", "teddy_bear", "tennis_racket", "tie",
    "toaster", "toilet", "toothbrush", "traffic_light", "train", "truck", "tv", "umbrella", "vase",
    "wine_glass", "zebra",
)  # fmt: skip
COCO_LABELS_SOURCE = "COCO object labels (multi-hot, not CNN features)"
COCO_LABELS_IDF_SOURCE = "COCO object labels (IDF-weighted multi-hot, not CNN features)"
COCO_FILE_NUMBER = re.compile(r"(\d+)\.[A-Za-z]+$")


def coco_image_id(file_name: str) -> str | None:
    """``COCO_val2014_000000000139.jpg`` -> ``"139"`` (the id used by the caption JSON)."""
    match = COCO_FILE_NUMBER.search(file_name)
    return str(int(match.group(1))) if match else None


def coco_object_label_features(
    path: str | Path, *, idf: bool = False, image_ids: Iterable[object] | None = None
) -> FeatureStore:
    """80-d multi-hot COCO object labels per image, a stand-in for CNN features.

    Reads ``val2014_object_labels.json`` (a list of ``{"file_name", "labels"}``).
    With ``idf`` each category is weighted by ``log(N / df)``, where N and df
    count all images in the file, so the weights do not depend on ``image_ids``.
    ``image_ids`` keeps only those images (in file order); ids absent from the
    file are simply not in the store, and :func:`align_captions` reports them.
    """
    path = Path(path)
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DataFormatError(path, f"cannot read as JSON: {error}") from error
    if not isinstance(entries, list):
        raise DataFormatError(path, "expected a JSON list of {file_name, labels} entries")
    num_categories = len(COCO_CATEGORIES)
    ids: list[str] = []
    multi_hot = np.zeros((len(entries), num_categories), dtype=np.float32)
    for position, entry in enumerate(entries):
        file_name = entry.get("file_name") if isinstance(entry, dict) else None
        image_id = coco_image_id(file_name) if isinstance(file_name, str) else None
        labels = entry.get("labels") if isinstance(entry, dict) else None
        if image_id is None or not isinstance(labels, list):
            raise DataFormatError(
                path, f"entry {position} is not {{file_name: COCO_..._<id>.jpg, labels: [...]}}"
            )
        for label in labels:
            if (
                isinstance(label, bool)
                or not isinstance(label, int)
                or not 0 <= label < num_categories
            ):
                raise DataFormatError(
                    path,
                    f"entry {position} ({file_name}): label {label!r} is not in 0..{num_categories - 1}",
                )
            multi_hot[position, label] = 1.0
        ids.append(image_id)
    source = COCO_LABELS_SOURCE
    if idf:
        document_frequency = multi_hot.sum(axis=0)
        weights = np.where(
            document_frequency > 0, np.log(len(entries) / np.maximum(document_frequency, 1)), 0.0
        )
        multi_hot *= weights.astype(np.float32)
        source = COCO_LABELS_IDF_SOURCE
    if image_ids is not None:
        wanted = {str(image_id) for image_id in image_ids}
        keep = [row for row, image_id in enumerate(ids) if image_id in wanted]
        logger.info("%s: %d of %d requested images have labels", path, len(keep), len(wanted))
        ids = [ids[row] for row in keep]
        multi_hot = multi_hot[keep]
    return FeatureStore.from_arrays(ids, multi_hot, source=f"{source}: {path}")
