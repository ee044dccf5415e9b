"""The COCO caption files the drop-in's command reads (an annotations file and a results
file), in the shape of ``pycocotools.coco.COCO`` that ``COCOEvalCap`` reads, without
pycocotools; malformed entries are refused naming the file and the entry."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from capsim.data.captions import read_json_file
from capsim.errors import DataFormatError


class CaptionFile:
    """The part of ``pycocotools.coco.COCO`` the evaluator reads, from a COCO annotations
    file or a results list, without pycocotools."""

    def __init__(self, annotations: list[dict], image_ids: Sequence[Any] | None = None):
        self.imgToAnns: dict[Any, list[dict]] = {i: [] for i in image_ids or ()}
        for annotation in annotations:
            self.imgToAnns.setdefault(annotation["image_id"], []).append(annotation)

    def getImgIds(self) -> list:
        return list(self.imgToAnns)


def _entries(path: Path, payload: Any, key: str | None) -> list[dict]:
    entries = payload.get(key) if key and isinstance(payload, dict) else payload
    if not isinstance(entries, list):
        want = f"a JSON object with an {key!r} list" if key else "a JSON list"
        raise DataFormatError(path, f"expected {want}")
    for index, entry in enumerate(entries):
        if not (isinstance(entry, dict) and "image_id" in entry and "caption" in entry):
            raise DataFormatError(path, f"entry {index} lacks image_id/caption: {entry!r:.120}")
        if not isinstance(entry["caption"], str):
            raise DataFormatError(path, f"entry {index}: caption must be a string")
    return entries


def load_files(annotations: str | Path, results: str | Path) -> tuple[CaptionFile, CaptionFile]:
    """The annotations and results files; a result naming an image that has no
    annotation is refused, naming the image (pycocotools only asserts)."""
    annotations, results = Path(annotations), Path(results)
    payload = read_json_file(annotations)
    images = (
        [image["id"] for image in payload.get("images", [])] if isinstance(payload, dict) else []
    )
    coco = CaptionFile(_entries(annotations, payload, "annotations"), images)
    result_entries = _entries(results, read_json_file(results), None)
    first_result: dict[Any, int] = {}
    for index, entry in enumerate(result_entries):
        image = entry["image_id"]
        if not coco.imgToAnns.get(image):
            raise DataFormatError(
                results,
                f"entry {index} names image {image!r}, which has no caption in {annotations}",
            )
        if first_result.setdefault(image, index) != index:
            raise DataFormatError(
                results,
                f"entry {index} is a second result for image {image!r} (entry "
                f"{first_result[image]} is the first): each image takes one result",
            )
    return coco, CaptionFile(result_entries)
