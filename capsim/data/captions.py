"""Readers of the public caption corpora, all returning ``list[CaptionRecord]``.

Caption text is kept raw (only stripped, with inner newlines turned into
spaces): tokenisation belongs to ``capsim.text`` so every model and metric sees
the same tokens whatever corpus they came from.

Where the originals come from:
  * COCO ``captions_{train,val}{2014,2017}.json``: https://cocodataset.org
    (annotations_trainval2014.zip / annotations_trainval2017.zip).
  * Karpathy ``dataset_{coco,flickr8k,flickr30k}.json``:
    https://cs.stanford.edu/people/karpathy/deepimagesent/ (caption_datasets.zip).
  * Flickr8k ``Flickr8k_text`` (token file and split lists): the University of
    Illinois Flickr8k request form (Hodosh et al., 2013).
  * TFDS ``coco_captions`` (Karpathy splits): capsim.data.tfds_coco.
  * Flickr30k in the Multi30k layout: github.com/multi30k/dataset,
    ``data/task2/raw/{split}.{1..5}.en.gz`` and ``data/task2/image_splits``
    (Flickr30k terms: non-commercial research and education only).
  * Conceptual Captions TSVs (``caption<TAB>url``, with or without a header):
    ai.google.com/research/ConceptualCaptions ("may be freely used for any purpose").
  * Lower-cased COCO line files (``[<image id> ]caption``), e.g. Texygen's
    ``image_coco.txt`` (COCO annotations, CC BY 4.0).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from capsim.data.records import CaptionRecord
from capsim.errors import DataFormatError

_NEWLINE_RE = re.compile(r"\r\n|[\r\n]")
_COCO_SPLIT_RE = re.compile(r"(train|val)20(14|17)")
_FLICKR_ID_RE = re.compile(r"^(.+)#(\d+)$")
_COCO_LINE = re.compile(r"^(\d+) (.*)$")
FLICKR30K_CAPTIONS = 5
CC3M_HEADER = ("caption", "image")
UNSPLIT = "unsplit"
FLICKR8K_TOKEN_FILE = "Flickr8k.token.txt"
FLICKR8K_SPLIT_FILES = {
    "train": "Flickr_8k.trainImages.txt",
    "dev": "Flickr_8k.devImages.txt",
    "test": "Flickr_8k.testImages.txt",
}
# The Illinois zip unpacks into this folder; a data_dir may point above it.
FLICKR8K_TEXT_FOLDER = "Flickr8k_text"


def clean_caption(text: str) -> str:
    """Raw caption text with inner newlines made spaces and outer whitespace stripped."""
    return _NEWLINE_RE.sub(" ", text).strip()


UTF8_BOM = b"\xef\xbb\xbf"  # the byte-order mark some tools put before UTF-8 text


def read_text_file(path: str | Path) -> str:
    """The whole file decoded strictly as UTF-8; bad bytes are reported with their line.
    A leading byte-order mark, as spreadsheet tools write, is dropped.

    Raises:
        DataFormatError: the path is missing, a directory or unreadable, or its bytes are
            not UTF-8 (with the line).
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError as error:
        raise DataFormatError(path, "file does not exist") from error
    except IsADirectoryError as error:
        raise DataFormatError(path, "is a directory, not a file") from error
    except OSError as error:
        raise DataFormatError(path, f"cannot be read ({error.strerror or error})") from error
    data = data.removeprefix(UTF8_BOM)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise DataFormatError(path, f"bytes are not valid UTF-8 ({error.reason})", line) from error


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its end-of-line) for each line of a text file."""
    lines = read_text_file(path).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, line in enumerate(lines, start=1):
        yield number, line.removesuffix("\r")


def read_json_file(path: str | Path) -> Any:
    """Parsed JSON; malformed JSON is reported with the file and line."""
    try:
        return json.loads(read_text_file(path))
    except json.JSONDecodeError as error:
        raise DataFormatError(path, f"malformed JSON ({error.msg})", error.lineno) from error


def write_json_atomically(path: str | Path, payload: Any) -> None:
    """``payload`` as indented JSON, replacing ``path`` in one step: a reader never sees
    half a file, and a failure leaves the previous one."""
    path = Path(path)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, path)


def read_references_json(path: str | Path) -> dict[str, list[str]]:
    """``{"<image id>": ["reference", ...]}``; ids become strings, references must be text."""
    data = read_json_file(path)
    if not isinstance(data, dict):
        raise DataFormatError(path, "expected an object mapping image id -> list of references")
    for key, refs in data.items():
        if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
            raise DataFormatError(path, f"image {key!r}: expected a non-empty list of strings")
        for j, ref in enumerate(refs):
            if not ref.strip():
                raise DataFormatError(path, f"image {key!r}: reference {j} is empty")
    return {str(k): v for k, v in data.items()}


def read_candidates_json(path: str | Path) -> list[tuple[str, str]]:
    """(image id, caption) pairs from a COCO results list ``[{"image_id", "caption"}, ...]``."""
    data = read_json_file(path)
    if not isinstance(data, list):
        raise DataFormatError(path, 'expected a list of {"image_id": ..., "caption": ...}')
    pairs = []
    for index, item in enumerate(data):
        if not isinstance(item, dict) or "image_id" not in item or "caption" not in item:
            raise DataFormatError(path, f"entry {index}: needs 'image_id' and 'caption'")
        if not isinstance(item["caption"], str):
            raise DataFormatError(path, f"entry {index}: caption must be a string")
        pairs.append((str(item["image_id"]), item["caption"]))
    return pairs


def _require(condition: bool, path: str | Path, message: str) -> None:
    if not condition:
        raise DataFormatError(path, message)


def coco_split_from_name(path: str | Path) -> str:
    """``train``/``val`` from a COCO file name such as ``captions_val2017.json``."""
    match = _COCO_SPLIT_RE.search(Path(path).name)
    return match.group(1) if match else UNSPLIT


def read_coco_captions(path: str | Path, split: str | None = None) -> list[CaptionRecord]:
    """Captions of a COCO ``captions_*.json`` file, one record per annotation."""
    payload = read_json_file(path)
    _require(
        isinstance(payload, dict) and isinstance(payload.get("annotations"), list),
        path,
        "expected a JSON object with an 'annotations' list",
    )
    split = split or coco_split_from_name(path)
    records = []
    for index, annotation in enumerate(payload["annotations"]):
        try:
            image_id, caption_id, caption = (
                annotation["image_id"],
                annotation["id"],
                annotation["caption"],
            )
            record = CaptionRecord(
                str(int(image_id)), str(int(caption_id)), clean_caption(caption), split
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as error:
            raise DataFormatError(
                path,
                f"annotation #{index} ({annotation!r:.120}) lacks a valid "
                f"image_id/id/caption ({error!r})",
            ) from error
        records.append(record)
    return records


def read_karpathy(path: str | Path) -> list[CaptionRecord]:
    """Captions of a Karpathy ``dataset_*.json`` file with its train/val/test/restval split."""
    payload = read_json_file(path)
    _require(
        isinstance(payload, dict) and isinstance(payload.get("images"), list),
        path,
        "expected a JSON object with an 'images' list",
    )
    records = []
    for index, image in enumerate(payload["images"]):
        try:
            image_id = str(image["cocoid"]) if "cocoid" in image else image["filename"]
            split = image["split"]
            records.extend(
                CaptionRecord(
                    image_id, str(sentence["sentid"]), clean_caption(sentence["raw"]), split
                )
                for sentence in image["sentences"]
            )
        except (KeyError, TypeError, AttributeError) as error:
            raise DataFormatError(
                path,
                f"image #{index} ({str(image)[:120]}) lacks a valid "
                f"cocoid/filename, split or sentences[raw, sentid] ({error!r})",
            ) from error
    return records


def split_flickr8k_id(caption_id: str) -> tuple[str, int] | None:
    """``('img.jpg', 2)`` from ``'img.jpg#2'``, or None when the id has no ``#n``."""
    match = _FLICKR_ID_RE.match(caption_id)
    return (match.group(1), int(match.group(2))) if match else None


def read_flickr8k_tokens(token_file: str | Path) -> dict[str, str]:
    """Caption id (``<image>#<n>``) -> cleaned caption text, in file order."""
    captions: dict[str, str] = {}
    for number, line in iter_lines(token_file):
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataFormatError(
                token_file,
                f"expected '<image>#<n><TAB><caption>', found {len(fields) - 1} tabs",
                number,
            )
        caption_id, text = fields
        if split_flickr8k_id(caption_id) is None:
            raise DataFormatError(
                token_file, f"caption id {caption_id!r} does not end in '#<n>'", number
            )
        if caption_id in captions:
            raise DataFormatError(token_file, f"caption id {caption_id!r} appears twice", number)
        captions[caption_id] = clean_caption(text)
    return captions


def _read_flickr8k_splits(split_files: Mapping[str, str | Path]) -> dict[str, str]:
    image_split: dict[str, str] = {}
    for split, split_path in split_files.items():
        for number, line in iter_lines(split_path):
            image = line.strip()
            if not image:
                continue
            if image in image_split:
                raise DataFormatError(
                    split_path,
                    f"image {image!r} is already in split {image_split[image]!r}",
                    number,
                )
            image_split[image] = split
    return image_split


def read_flickr8k(
    token_file: str | Path, split_files: Mapping[str, str | Path] | None = None
) -> list[CaptionRecord]:
    """Flickr8k captions; images listed in no split file get split ``unsplit``.

    Image names are kept exactly as written (including the ``.jpg.1`` quirk).
    """
    image_split = _read_flickr8k_splits(split_files or {})
    records = []
    for caption_id, text in read_flickr8k_tokens(token_file).items():
        image, _ = split_flickr8k_id(caption_id)
        records.append(CaptionRecord(image, caption_id, text, image_split.get(image, UNSPLIT)))
    return records


def _find_in(data_dir: Path, name: str) -> Path:
    for folder in (data_dir, data_dir / FLICKR8K_TEXT_FOLDER):
        if (folder / name).is_file():
            return folder / name
    raise DataFormatError(data_dir, f"no {name} here or in {FLICKR8K_TEXT_FOLDER}/")


def read_flickr8k_dir(data_dir: str | Path) -> list[CaptionRecord]:
    """Flickr8k from a folder holding the token file and the three split lists."""
    data_dir = Path(data_dir)
    return read_flickr8k(
        _find_in(data_dir, FLICKR8K_TOKEN_FILE),
        {split: _find_in(data_dir, name) for split, name in FLICKR8K_SPLIT_FILES.items()},
    )


def _require_caption(text: str, path: Path, line: int) -> str:
    caption = clean_caption(text)
    if not caption:
        raise DataFormatError(path, "empty caption", line)
    return caption


def read_multi30k(folder: str | Path, split: str = "train") -> list[CaptionRecord]:
    """Flickr30k captions in the Multi30k layout: ``{split}_images.txt`` names image i on
    line i, and line i of ``{split}.{k}.en`` is its k-th caption (k = 1..5)."""
    folder = Path(folder)
    images_file = folder / f"{split}_images.txt"
    images = [(n, line.strip()) for n, line in iter_lines(images_file)]
    for number, image in images:
        if not image:
            raise DataFormatError(images_file, "empty image name", number)
    records = []
    for k in range(1, FLICKR30K_CAPTIONS + 1):
        path = folder / f"{split}.{k}.en"
        lines = list(iter_lines(path))
        if len(lines) != len(images):
            raise DataFormatError(
                path, f"{len(lines)} captions for the {len(images)} images of {images_file.name}"
            )
        for (number, text), (_, image) in zip(lines, images, strict=True):
            records.append(
                CaptionRecord(
                    f"flickr30k/{image}",
                    f"flickr30k/{image}#{k}",
                    _require_caption(text, path, number),
                    split,
                )
            )
    return records


def read_cc3m_tsv(path: str | Path) -> list[CaptionRecord]:
    """Conceptual Captions rows ``caption<TAB>image URL or name``; a ``caption<TAB>image``
    header is skipped. One caption per image, so each row is its own image."""
    path = Path(path)
    records = []
    for number, line in iter_lines(path):
        fields = line.split("\t")
        if number == 1 and tuple(f.strip().lower() for f in fields) == CC3M_HEADER:
            continue
        if len(fields) != 2:
            raise DataFormatError(
                path, f"expected 'caption<TAB>image', found {len(fields) - 1} tabs", number
            )
        if not fields[1].strip():
            raise DataFormatError(path, "empty image field", number)
        row = f"cc3m/{path.stem}:{number}"
        records.append(CaptionRecord(row, row, _require_caption(fields[0], path, number), "train"))
    return records


def read_coco_lines(path: str | Path) -> list[CaptionRecord]:
    """A lower-cased COCO caption file, one caption per line, with a leading
    ``<image id> `` on every line or on none. Lines without an id are images of their own
    (reconstruction and negatives, never a same-image positive)."""
    path = Path(path)
    lines = [(n, line) for n, line in iter_lines(path)]
    with_id = bool(lines) and _COCO_LINE.match(lines[0][1]) is not None
    records = []
    for number, line in lines:
        if with_id:
            match = _COCO_LINE.match(line)
            if match is None:
                raise DataFormatError(
                    path, "expected '<COCO image id> <caption>' like the first line", number
                )
            image, text = str(int(match.group(1))), match.group(2)
        else:
            image, text = f"coco_line/{path.stem}:{number}", line
        caption_id = f"coco_line/{path.stem}:{number}"
        records.append(
            CaptionRecord(image, caption_id, _require_caption(text, path, number), "train")
        )
    return records
