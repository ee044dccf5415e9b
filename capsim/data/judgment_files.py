"""Readers of the judgment files that recent caption-metric papers distribute, read as
they are shipped (the original authors' files are read by capsim.data.judgments and
capsim.data.pascal50s):

  * pairwise sets, e.g. long-caption pairs: JSON lines or a JSON list of
    ``{"references": [...], "better": ..., "worse": ...[, "id", "category", "image"]}``;
  * PASCAL-50S in the JSON layout of recent metric papers: ``{"HC": [{"captions": [a,
    b], "label": 0|1, "references": [...], "image": ...}, ...], "HI": ..., ...}``;
  * Flickr8k-Expert in the matching JSON layout (CLIPScore's ``flickr8k.json``): image ->
    ``{"ground_truth": [...], "human_judgement": [{"caption", "rating"}, ...]}``;
  * a user's own absolute set as a CSV with ``mt``, ``refs`` and ``score`` columns (the
    layout of the newest large caption-judgment sets), ``refs`` a JSON or Python list;
  * the hallucination sets as the ALOHa authors ship them (Petryk et al., NAACL 2024,
    github.com/DavidMChan/aloha ``data/``), each a JSON list: FOIL-nocaps (objects of
    ``image_path``, ``references``, ``baseline``, ``foil``, ``replacement``, ``domain``)
    and HAT (objects of ``caption``, ``references``, ``contains_hallucination``,
    ``image_path``, ...).

Every reader refuses malformed input naming the file and the row (its line where the
file has lines).
"""

from __future__ import annotations

import ast
import csv
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from capsim.data.captions import read_json_file, read_text_file
from capsim.data.judgments import Judgment, LabelJudgment, PairJudgment, iter_jsonl
from capsim.errors import DataFormatError

PASCAL_JSON_CATEGORIES = ("HC", "HI", "HM", "MM")
CSV_COLUMNS = ("mt", "refs", "score")
CSV_IMAGE_COLUMNS = ("imgid", "img", "image", "image_id")  # the first one present groups rows


def _captions(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str) and v.strip() for v in value)
    )


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _json_rows(path: str | Path) -> Iterator[tuple[int | None, str, Any]]:
    """(line or None, "row N", row) of a JSON list or of JSON lines (blank lines skipped;
    a line that is not a JSON object is refused)."""
    if read_text_file(path).lstrip().startswith("["):
        for index, row in enumerate(read_json_file(path)):
            yield None, f"row {index}", row
        return
    for index, (number, row) in enumerate(iter_jsonl(path)):
        yield number, f"row {index}", row


def read_caption_pairs(path: str | Path) -> list[PairJudgment]:
    """A pairwise set: each row's ``better`` caption preferred over its ``worse`` one
    (``preference`` 1.0), against its ``references``. ``image`` groups rows for the
    bootstrap (default: each pair alone); ``category`` defaults to "all"."""
    judgments = []
    for line, where, row in _json_rows(path):
        if not isinstance(row, dict):
            raise DataFormatError(path, f"{where}: expected a JSON object", line)
        if not _captions(row.get("references")):
            raise DataFormatError(
                path, f"{where}: references must be a non-empty list of captions", line
            )
        for side in ("better", "worse"):
            if not isinstance(row.get(side), str):
                raise DataFormatError(path, f"{where}: {side} must be a caption (a string)", line)
        for key in ("id", "category", "image"):
            if key in row and not isinstance(row[key], str | int):
                raise DataFormatError(path, f"{where}: {key} must be a string or a number", line)
        pair_id = str(row.get("id", len(judgments)))
        judgments.append(
            PairJudgment(
                str(row.get("image", f"pair {pair_id}")),
                row["better"],
                row["worse"],
                tuple(row["references"]),
                1.0,
                str(row.get("category", "all")),
            )
        )
    if not judgments:
        raise DataFormatError(path, "no pairs")
    return judgments


def is_pascal50s_json(data: Any) -> bool:
    """The JSON layout of PASCAL-50S: an object keyed by its categories."""
    return isinstance(data, dict) and bool(data) and set(data) <= set(PASCAL_JSON_CATEGORIES)


def read_pascal50s_json(path: str | Path) -> list[PairJudgment]:
    """PASCAL-50S in the JSON layout: per category, items with two ``captions``, the
    ``label`` (index of the one the annotators preferred), ``references`` and ``image``.
    Its labels are one preferred caption per pair (``preference`` 1.0 or 0.0), not the
    vote fractions of the MATLAB release."""
    data = read_json_file(path)
    if not is_pascal50s_json(data):
        raise DataFormatError(
            path, f"expected an object keyed by {', '.join(PASCAL_JSON_CATEGORIES)}"
        )
    judgments = []
    for category, items in data.items():
        if not isinstance(items, list):
            raise DataFormatError(path, f"{category}: expected a list of items")
        for index, item in enumerate(items):
            where = f"{category} item {index}"
            if not isinstance(item, dict):
                raise DataFormatError(path, f"{where}: expected a JSON object")
            captions, label = item.get("captions"), item.get("label")
            if not (
                isinstance(captions, list) and len(captions) == 2 and all(map(_text, captions))
            ):
                raise DataFormatError(path, f"{where}: captions must be two non-empty strings")
            if isinstance(label, bool) or label not in (0, 1):
                raise DataFormatError(path, f"{where}: label {label!r} is not 0 or 1")
            if not _captions(item.get("references")):
                raise DataFormatError(
                    path, f"{where}: references must be a non-empty list of captions"
                )
            if not isinstance(item.get("image"), str | int):
                raise DataFormatError(path, f"{where}: image must be a string or a number")
            judgments.append(
                PairJudgment(
                    str(item["image"]),
                    captions[0].strip(),
                    captions[1].strip(),
                    tuple(r.strip() for r in item["references"]),
                    1.0 - float(label),
                    category,
                )
            )
    if not judgments:
        raise DataFormatError(path, "no pairs")
    return judgments


def read_flickr8k_expert_json(path: str | Path) -> list[Judgment]:
    """Flickr8k-Expert in the JSON layout: one Judgment per rating, as the CLIPScore
    protocol counts them. Ratings that are NaN are left out (as that code does), and so is
    a candidate equal to one of its image's references."""
    data = read_json_file(path)
    if not isinstance(data, dict) or not data:
        raise DataFormatError(path, "expected an object mapping each image to its judgments")
    judgments = []
    for key, entry in data.items():
        if not isinstance(entry, dict):
            raise DataFormatError(path, f"image {key!r}: expected a JSON object")
        references, ratings = entry.get("ground_truth"), entry.get("human_judgement")
        if not _captions(references):
            raise DataFormatError(
                path, f"image {key!r}: ground_truth must be a non-empty list of captions"
            )
        if not isinstance(ratings, list):
            raise DataFormatError(path, f"image {key!r}: human_judgement must be a list")
        image = Path(str(entry.get("image_path", key))).name
        references = tuple(" ".join(r.split()) for r in references)
        for index, rating in enumerate(ratings):
            where = f"image {key!r} judgement {index}"
            if not isinstance(rating, dict) or not isinstance(rating.get("caption"), str):
                raise DataFormatError(
                    path, f"{where}: expected {{'caption': str, 'rating': number}}"
                )
            score = rating.get("rating")
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise DataFormatError(path, f"{where}: rating {score!r} is not a number")
            candidate = " ".join(rating["caption"].split())
            if math.isnan(score) or candidate in references:
                continue
            judgments.append(Judgment(image, candidate, None, references, float(score)))
    if not judgments:
        raise DataFormatError(path, "no ratings")
    return judgments


def _references_cell(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


def read_judgment_csv(path: str | Path) -> list[Judgment]:
    """A user's absolute set: a CSV with ``mt`` (the candidate), ``refs`` (a JSON or Python
    list of references) and ``score`` columns; an ``imgid``/``img``/``image``/``image_id``
    column groups rows by image (default: each row alone). ``candidate_id`` is the row's
    0-based position, its row id."""
    reader = csv.DictReader(io.StringIO(read_text_file(path), newline=""))
    missing = [c for c in CSV_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise DataFormatError(
            path, f"no column {', '.join(missing)} (columns: {reader.fieldnames})", 1
        )
    image_column = next((c for c in CSV_IMAGE_COLUMNS if c in reader.fieldnames), None)
    judgments = []
    for index, row in enumerate(reader):
        line = reader.line_num
        if None in row or any(row[c] is None for c in CSV_COLUMNS):
            raise DataFormatError(
                path, f"row {index}: expected {len(reader.fieldnames)} fields", line
            )
        refs = _references_cell(row["refs"])
        if not _captions(refs):
            raise DataFormatError(
                path, f"row {index}: refs must be a non-empty list of captions", line
            )
        try:
            score = float(row["score"])
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise DataFormatError(
                path, f"row {index}: score {row['score']!r} is not a number", line
            )
        image = row[image_column] if image_column else f"row {index}"
        judgments.append(Judgment(str(image), row["mt"].strip(), str(index), tuple(refs), score))
    if not judgments:
        raise DataFormatError(path, "no rows")
    return judgments


def _object_with_references(path: str | Path, where: str, row: Any, line: int | None) -> None:
    """Refuses a row that is not an object holding a non-empty list of references."""
    if not isinstance(row, dict):
        raise DataFormatError(path, f"{where}: expected a JSON object", line)
    if not _captions(row.get("references")):
        raise DataFormatError(
            path, f"{where}: references must be a non-empty list of captions", line
        )
    if not isinstance(row.get("image_path"), str | int):
        raise DataFormatError(path, f"{where}: image_path must be a string or a number", line)


def read_foil_nocaps(path: str | Path) -> list[PairJudgment]:
    """FOIL-nocaps as ALOHa ships it: per row, ``baseline`` (the machine caption) preferred
    over ``foil`` (the same caption with one object word swapped) against all its
    ``references``; ``domain`` (in-domain, near-domain, ...) is the pair's category and
    ``image_path`` its image."""
    judgments = []
    for line, where, row in _json_rows(path):
        _object_with_references(path, where, row, line)
        for side in ("baseline", "foil"):
            if not _text(row.get(side)):
                raise DataFormatError(
                    path,
                    f"{where}: {side} must be a non-empty caption, got {row.get(side)!r}",
                    line,
                )
        if not _text(row.get("domain")):
            raise DataFormatError(path, f"{where}: domain must be a non-empty string", line)
        references = tuple(row["references"])
        judgments.append(
            PairJudgment(
                str(row["image_path"]), row["baseline"], row["foil"], references, 1.0, row["domain"]
            )
        )
    if not judgments:
        raise DataFormatError(path, "no pairs")
    return judgments


def read_hat(path: str | Path) -> list[LabelJudgment]:
    """HAT as ALOHa ships it: per row one machine ``caption`` with its ``references``,
    flawed when ``contains_hallucination`` is true (a JSON boolean, nothing else);
    ``image_path`` groups captions by image. A caption's row id is its 0-based position."""
    judgments = []
    for line, where, row in _json_rows(path):
        _object_with_references(path, where, row, line)
        if "contains_hallucination" not in row:
            raise DataFormatError(path, f"{where}: no contains_hallucination label", line)
        label = row["contains_hallucination"]
        if not isinstance(label, bool):
            raise DataFormatError(
                path, f"{where}: contains_hallucination {label!r} is not true or false", line
            )
        if not _text(row.get("caption")):
            raise DataFormatError(
                path,
                f"{where}: caption must be a non-empty string, got {row.get('caption')!r}",
                line,
            )
        judgments.append(
            LabelJudgment(
                str(row["image_path"]),
                row["caption"],
                str(len(judgments)),
                tuple(row["references"]),
                label,
            )
        )
    if not judgments:
        raise DataFormatError(path, "no captions")
    return judgments
