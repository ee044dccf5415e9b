"""Readers of human judgments of image captions, the ground truth for metric evaluation.

Every reader returns plain records (``Judgment`` for absolute scores,
``PairJudgment`` for pairwise preferences, ``LabelJudgment`` for a label a caption) so
the correlation harness never needs to know which benchmark a score came from.

Where the originals come from:
  * Flickr8k-Expert / Flickr8k-CF (``ExpertAnnotations.txt``,
    ``CrowdFlowerAnnotations.txt``): the Flickr8k_text package (Hodosh et al., 2013).
  * THumB 1.0 (Kasai et al., 2022): github.com/jungokasai/THumB, ``mscoco/``.
  * PASCAL-50S (Vedantam et al., 2015), read by capsim.data.pascal50s: the CIDEr release, ``pair_pascal.mat`` and
    ``consensus_pascal.mat``.
  * Composite (Aditya et al., 2015): the AMT result CSVs (``*_correctness.csv``,
    ``*_throughness.csv``).
  * Nebula (Matsuda et al., ACCV 2024, the test set of DENEB): one JSON file of rows
    ``{"imgid", "mt", "refs", "score"}``.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from capsim.data.captions import (
    iter_lines,
    read_flickr8k_tokens,
    read_json_file,
    read_text_file,
    split_flickr8k_id,
)
from capsim.errors import DataFormatError


@dataclasses.dataclass(frozen=True)
class Judgment:
    """One human score of one candidate caption for one image."""

    image_id: str
    candidate: str
    candidate_id: str | None
    references: tuple[str, ...]
    score: float
    rater: int | None = None
    system: str | None = None


@dataclasses.dataclass(frozen=True)
class PairJudgment:
    """Human preference between two candidate captions of one image.

    ``preference`` is the fraction of votes for ``candidate_a`` (0.5 is a tie).
    """

    image_id: str
    candidate_a: str
    candidate_b: str
    references: tuple[str, ...]
    preference: float
    category: str


@dataclasses.dataclass(frozen=True)
class LabelJudgment:
    """One human label of one candidate caption: ``flawed`` when the people judged it wrong
    (HAT: it names something the image does not show). ``candidate_id`` is its row id."""

    image_id: str
    candidate: str
    candidate_id: str
    references: tuple[str, ...]
    flawed: bool


def _parse_score(
    text: str, path: str | Path, line: int, what: str, low: float, high: float
) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not low <= value <= high:
        raise DataFormatError(path, f"{what} {text!r} is not a number in [{low}, {high}]", line)
    return value


# --------------------------------------------------------------------------- Flickr8k

EXPERT_FIELDS = 5  # query image, caption id, three expert scores
EXPERT_SCORE_RANGE = (1.0, 4.0)
CF_FIELDS = 5  # query image, caption id, fraction "yes", count yes, count no
CF_SCORE_RANGE = (0.0, 1.0)


def _flickr8k_references(captions: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """Image -> its captions in ``#0..#n`` order."""
    numbered: dict[str, list[tuple[int, str]]] = {}
    for caption_id, text in captions.items():
        image, number = split_flickr8k_id(caption_id)
        numbered.setdefault(image, []).append((number, text))
    return {image: tuple(text for _, text in sorted(pairs)) for image, pairs in numbered.items()}


def _flickr8k_rows(
    annotations_path: str | Path, token_file: str | Path, n_fields: int, skip_own_references: bool
) -> Iterator[tuple[int, str, str, str, tuple[str, ...], list[str]]]:
    """(line, query image, candidate id, candidate text, references, score fields) per kept row."""
    captions = read_flickr8k_tokens(token_file)
    references = _flickr8k_references(captions)
    for number, line in iter_lines(annotations_path):
        fields = line.split("\t")
        if len(fields) != n_fields:
            raise DataFormatError(
                annotations_path,
                f"expected {n_fields} tab-separated fields, found {len(fields)}",
                number,
            )
        image, candidate_id = fields[0], fields[1]
        if candidate_id not in captions:
            raise DataFormatError(
                annotations_path, f"caption id {candidate_id!r} is not in {token_file}", number
            )
        if image not in references:
            raise DataFormatError(
                annotations_path, f"query image {image!r} has no captions in {token_file}", number
            )
        if skip_own_references and split_flickr8k_id(candidate_id)[0] == image:
            continue
        yield number, image, candidate_id, captions[candidate_id], references[image], fields[2:]


def read_flickr8k_expert(
    annotations_path: str | Path, token_file: str | Path, *, skip_own_references: bool = True
) -> list[Judgment]:
    """Flickr8k-Expert, one Judgment per expert rating (rater 0, 1, 2), as in CLIPScore.

    ``skip_own_references`` drops rows whose candidate is one of the query
    image's own captions (it would be scored against itself).
    """
    judgments = []
    for number, image, candidate_id, candidate, references, scores in _flickr8k_rows(
        annotations_path, token_file, EXPERT_FIELDS, skip_own_references
    ):
        for rater, text in enumerate(scores):
            score = _parse_score(
                text, annotations_path, number, "expert score", *EXPERT_SCORE_RANGE
            )
            judgments.append(Judgment(image, candidate, candidate_id, references, score, rater))
    return judgments


def read_flickr8k_cf(
    annotations_path: str | Path, token_file: str | Path, *, skip_own_references: bool = True
) -> list[Judgment]:
    """Flickr8k-CF (CrowdFlower): score = fraction of "yes, it describes the image" votes."""
    judgments = []
    for number, image, candidate_id, candidate, references, fields in _flickr8k_rows(
        annotations_path, token_file, CF_FIELDS, skip_own_references
    ):
        score = _parse_score(fields[0], annotations_path, number, "yes fraction", *CF_SCORE_RANGE)
        for count in fields[1:]:
            if not count.isdigit():
                raise DataFormatError(
                    annotations_path, f"vote count {count!r} is not a whole number", number
                )
        judgments.append(Judgment(image, candidate, candidate_id, references, score))
    return judgments


# --------------------------------------------------------------------------- THumB

THUMB_SCORE_KEY = "human_score"  # (P + R) / 2 plus the Flu/Con/Inc penalties


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; malformed JSON or a line that is not
    an object is refused with its line."""
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataFormatError(path, f"malformed JSON ({error.msg})", number) from error
        if not isinstance(row, dict):
            raise DataFormatError(path, "expected a JSON object", number)
        yield number, row


def _thumb_references(path: str | Path) -> dict[str, tuple[str, ...]]:
    references = {}
    for number, row in iter_jsonl(path):
        refs = row.get("refs")
        if (
            "seg_id" not in row
            or not isinstance(refs, list)
            or not all(isinstance(ref, str) for ref in refs)
        ):
            raise DataFormatError(path, "expected {'seg_id': ..., 'refs': [str, ...]}", number)
        references[str(row["seg_id"])] = tuple(ref.strip() for ref in refs)
    return references


def read_thumb(jsonl_path: str | Path, references_path: str | Path | None = None) -> list[Judgment]:
    """THumB 1.0 MSCOCO (``mscoco_THumB-1.0.jsonl``), one Judgment per (image, system).

    Rows carry ``SYS``, ``seg_id`` (the COCO image id), ``hyp``, ``image`` and
    the rubric scores ``P``, ``R``, ``Fl``, ``Con``, ``Inc`` and their total
    ``human_score``, which becomes ``score``. References come from
    ``mscoco_references.json`` (JSON lines ``{"seg_id", "refs"}``); without it
    ``references`` is empty and the caller joins COCO captions on ``image_id``.
    """
    references = _thumb_references(references_path) if references_path is not None else None
    judgments = []
    for number, row in iter_jsonl(jsonl_path):
        try:
            seg_id, system, hyp = str(row["seg_id"]), row["SYS"], row["hyp"]
            score = float(row[THUMB_SCORE_KEY])
        except (KeyError, TypeError, ValueError) as error:
            raise DataFormatError(
                jsonl_path,
                f"row lacks a valid seg_id/SYS/hyp/{THUMB_SCORE_KEY} ({error!r})",
                number,
            ) from error
        if not isinstance(hyp, str) or not math.isfinite(score):
            raise DataFormatError(jsonl_path, "hyp must be text and the score finite", number)
        if references is None:
            image_refs: tuple[str, ...] = ()
        elif seg_id in references:
            image_refs = references[seg_id]
        else:
            raise DataFormatError(
                jsonl_path, f"seg_id {seg_id!r} has no references in {references_path}", number
            )
        judgments.append(
            Judgment(
                image_id=seg_id,
                candidate=hyp.strip(),
                candidate_id=f"{seg_id}#{system}",
                references=image_refs,
                score=score,
                system=str(system),
            )
        )
    return judgments


# --------------------------------------------------------------------------- Composite

COMPOSITE_IMAGE_COLUMN = "Input.image_url"
COMPOSITE_TEXT_COLUMN = "Input.text{}"
COMPOSITE_ANSWER_COLUMN = "Answer.Q{}Answer"
COMPOSITE_SCORE_RANGE = (1.0, 5.0)


def read_composite_csv(
    path: str | Path, references: Mapping[str, Sequence[str]] | None = None
) -> list[Judgment]:
    """Composite (Aditya et al., 2015) AMT results: one Judgment per rated caption.

    Accepted columns (the published files, ``;``-separated; ``,`` also works):
    ``Input.image_url``, and for k = 1, 2, ...: ``Input.text{k}`` (a caption) with
    ``Answer.Q{k}Answer`` (its 1-5 correctness or thoroughness score). Other
    columns are ignored, and a slot with an empty caption or answer is unrated
    and skipped. ``image_id`` is the file name of the image URL. The CSV holds
    no references: pass ``references`` (image file name -> captions) to attach
    them, otherwise ``references`` is empty.
    """
    text = read_text_file(path)
    header_line = text.split("\n", 1)[0]
    delimiter = ";" if header_line.count(";") > header_line.count(",") else ","
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    columns = reader.fieldnames or []
    slots = []
    while COMPOSITE_TEXT_COLUMN.format(len(slots) + 1) in columns:
        slots.append(len(slots) + 1)
    if (
        COMPOSITE_IMAGE_COLUMN not in columns
        or not slots
        or any(COMPOSITE_ANSWER_COLUMN.format(slot) not in columns for slot in slots)
    ):
        raise DataFormatError(
            path,
            f"header needs {COMPOSITE_IMAGE_COLUMN} and matching "
            f"{COMPOSITE_TEXT_COLUMN.format('k')}/{COMPOSITE_ANSWER_COLUMN.format('k')} columns, "
            f"found {columns}",
            1,
        )
    judgments = []
    for row in reader:
        line = reader.line_num
        url = (row[COMPOSITE_IMAGE_COLUMN] or "").strip()
        if not url:
            raise DataFormatError(path, f"empty {COMPOSITE_IMAGE_COLUMN}", line)
        image_id = url.rstrip("/").rsplit("/", 1)[-1]
        if references is None:
            image_refs: tuple[str, ...] = ()
        elif image_id in references:
            image_refs = tuple(references[image_id])
        else:
            raise DataFormatError(path, f"image {image_id!r} has no references", line)
        for slot in slots:
            caption = (row[COMPOSITE_TEXT_COLUMN.format(slot)] or "").strip()
            answer = (row[COMPOSITE_ANSWER_COLUMN.format(slot)] or "").strip()
            if not caption or not answer:
                continue
            score = _parse_score(
                answer, path, line, COMPOSITE_ANSWER_COLUMN.format(slot), *COMPOSITE_SCORE_RANGE
            )
            judgments.append(Judgment(image_id, caption, f"{image_id}#{slot}", image_refs, score))
    return judgments


# --------------------------------------------------------------------------- Nebula

NEBULA_SCORE_RANGE = (0.0, 1.0)


def read_nebula(path: str | Path) -> list[Judgment]:
    """Nebula: a JSON array (or JSON lines) of ``{"imgid", "mt", "refs", "score"}``, one
    Judgment per row, references as given. ``candidate_id`` is the row's 0-based position,
    which is also its row id. Candidates equal to one of their own references are kept,
    as the published protocol keeps them. Errors name the row (its line for JSON lines).
    """
    text = read_text_file(path)
    if text.lstrip().startswith("["):
        data = read_json_file(path)
        rows = [(None, f"row {i}", row) for i, row in enumerate(data)]
    else:
        rows = [(line, f"row {i}", row) for i, (line, row) in enumerate(iter_jsonl(path))]
    judgments = []
    for index, (line, where, row) in enumerate(rows):
        if not isinstance(row, dict):
            raise DataFormatError(path, f"{where}: expected a JSON object", line)
        refs, candidate, image = row.get("refs"), row.get("mt"), row.get("imgid")
        if not isinstance(image, str | int) or isinstance(image, bool):
            raise DataFormatError(path, f"{where}: imgid must be a string or a number", line)
        if not isinstance(candidate, str):
            raise DataFormatError(path, f"{where}: mt must be the candidate caption", line)
        if not isinstance(refs, list) or not refs or not all(isinstance(r, str) for r in refs):
            raise DataFormatError(path, f"{where}: refs must be a non-empty list of captions", line)
        score = row.get("score")
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise DataFormatError(path, f"{where}: score {score!r} is not a number", line)
        _parse_score(str(score), path, line, f"{where}: score", *NEBULA_SCORE_RANGE)
        judgments.append(
            Judgment(str(image), candidate.strip(), str(index), tuple(refs), float(score))
        )
    if not judgments:
        raise DataFormatError(path, "no rows")
    return judgments
