"""The human-judgment sets, one registry entry each.

An entry says all there is to know about a set: what its path is, how it is
read, what kind of judgment the humans gave (``JudgmentKind``: the one field that
scoring, the report and the significance tests read to treat the set), and the
statistic that heads its report. The harness (``capsim.eval.judgment_harness``), the
``judgments`` evaluator and ``python -m i2ce_jax.evaluate`` read the sets from
``JUDGMENT_SETS`` only, so adding a set is one entry here (and its test).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from pathlib import Path

from capsim.data import judgment_files
from capsim.data import judgments as judgment_readers
from capsim.data.captions import (
    UTF8_BOM,
    read_flickr8k_tokens,
    read_references_json,
    split_flickr8k_id,
)
from capsim.data.judgments import Judgment, PairJudgment
from capsim.data.pascal50s import PASCAL_PAIRS_FILE, pascal_votes_file, read_pascal50s
from capsim.errors import DataFormatError

References = Mapping[str, list[str]]  # image id -> reference captions
JudgmentList = list[Judgment] | list[PairJudgment]


class JudgmentKind(enum.Enum):
    """What the humans gave, which decides how a metric is scored and compared with them."""

    # A score per (image, candidate): the metric is correlated with it over rating rows.
    ABSOLUTE = "absolute"
    # Votes between two candidates against a few sampled references (PASCAL-50S): the
    # metric's accuracy at picking the majority's, per category.
    VOTED_PAIRS = "voted_pairs"
    # A better and a worse caption against all their references (a pair file): the share
    # of pairs the metric orders right.
    BETTER_WORSE = "better_worse"


@dataclasses.dataclass(frozen=True)
class JudgmentSet:
    """One human-judgment set, scored with its statistic as its authors published it.

    ``path``: what the path given for the set is. ``read(path, references)``:
    its judgments, ``references`` being the user's (image id -> captions) or
    None; ``read`` is None for a set built in-process rather than read from
    files. ``kind``: what the humans gave (``JudgmentKind``). ``statistic``: the report
    key that heads the set: ``tau_c``, ``tau_b`` or ``pearson`` over rating rows for
    absolute sets, ``mean`` (accuracy averaged over categories) for voted pairs,
    ``accuracy`` for better-worse pairs. ``row_ids``: what names a rated candidate (the
    keys of ``--scores`` files), and ``row_id`` computes it from a judgment of an
    absolute set (pair sets are keyed ``{pair}{a|b}``).
    """

    name: str
    path: str
    read: Callable[[Path, References | None], JudgmentList] | None
    kind: JudgmentKind
    statistic: str
    row_ids: str
    row_id: Callable[[Judgment], str] | None = None


def _image_and_candidate(judgment: Judgment) -> str:
    return f"{judgment.image_id} {judgment.candidate_id}"


def _candidate(judgment: Judgment) -> str:
    return str(judgment.candidate_id)


def _read_flickr8k_expert(path: Path, references: References | None) -> list[Judgment]:
    del references  # the token file beside the ratings, or the JSON, holds them
    if path.is_file():
        return judgment_files.read_flickr8k_expert_json(path)
    return judgment_readers.read_flickr8k_expert(
        path / "ExpertAnnotations.txt", path / "Flickr8k.token.txt"
    )


def _is_json(path: Path) -> bool:
    """Whether a file holds JSON (by its first bytes: MATLAB files begin "MATLAB")."""
    if not path.is_file():
        return False
    with path.open("rb") as handle:
        return handle.read(64).removeprefix(UTF8_BOM).lstrip()[:1] in (b"{", b"[")


def _read_pascal50s(path: Path, references: References | None) -> list[PairJudgment]:
    if path.is_dir():
        path = path / PASCAL_PAIRS_FILE
    if _is_json(path):
        return judgment_files.read_pascal50s_json(path)
    return read_pascal50s(path, references)


def pascal50s_labels(path: str | Path) -> str:
    """Which human labels a PASCAL-50S path brings: the JSON's, the 48 triplet votes of
    consensus_pascal.mat, or pair_pascal.mat's own votes (as released, without it)."""
    path = Path(path)
    if path.is_dir():
        path = path / PASCAL_PAIRS_FILE
    if _is_json(path):
        return "the JSON file's label field (one preferred caption a pair)"
    if pascal_votes_file(path) == path:
        return "the majority of a pair's 10-11 votes in pair_pascal.mat's result (ties left out)"
    return "the majority of the 48 votes a pair in consensus_pascal.mat (ties left out)"


def _read_pairs(path: Path, references: References | None) -> list[PairJudgment]:
    del references  # each row holds its own
    return judgment_files.read_caption_pairs(path)


def _read_csv(path: Path, references: References | None) -> list[Judgment]:
    del references  # each row holds its own
    return judgment_files.read_judgment_csv(path)


def _read_flickr8k_cf(folder: Path, references: References | None) -> list[Judgment]:
    del references  # the token file beside the ratings holds them
    return judgment_readers.read_flickr8k_cf(
        folder / "CrowdFlowerAnnotations.txt", folder / "Flickr8k.token.txt"
    )


def _read_thumb(path: Path, references: References | None) -> list[Judgment]:
    del references  # THumB's own references file, when it is beside the ratings
    beside = path.with_name("mscoco_references.json")
    return judgment_readers.read_thumb(path, beside if beside.exists() else None)


def _read_nebula(path: Path, references: References | None) -> list[Judgment]:
    del references  # each row holds its own
    return judgment_readers.read_nebula(path)


def _read_composite(path: Path, references: References | None) -> list[Judgment]:
    if references is None:
        raise DataFormatError(path, "Composite files hold no references: pass references")
    return judgment_readers.read_composite_csv(path, references)


JUDGMENT_SETS: dict[str, JudgmentSet] = {
    entry.name: entry
    for entry in (
        # Kendall τc over the three experts' rating rows (the CLIPScore protocol).
        JudgmentSet(
            name="flickr8k_expert",
            path="a folder with ExpertAnnotations.txt and Flickr8k.token.txt, or flickr8k.json",
            read=_read_flickr8k_expert,
            kind=JudgmentKind.ABSOLUTE,
            statistic="tau_c",
            row_ids='"QUERY.jpg CAPTION.jpg#N": the first two columns, space-joined',
            row_id=_image_and_candidate,
        ),
        # Kendall τb over the fraction of "yes" votes, which ties heavily.
        JudgmentSet(
            name="flickr8k_cf",
            path="a folder with CrowdFlowerAnnotations.txt and Flickr8k.token.txt",
            read=_read_flickr8k_cf,
            kind=JudgmentKind.ABSOLUTE,
            statistic="tau_b",
            row_ids='"QUERY.jpg CAPTION.jpg#N": the first two columns, space-joined',
            row_id=_image_and_candidate,
        ),
        # Pearson over rows, plus system-level agreement across its captioning systems.
        JudgmentSet(
            name="thumb",
            path="mscoco_THumB-1.0.jsonl, with mscoco_references.json beside it",
            read=_read_thumb,
            kind=JudgmentKind.ABSOLUTE,
            statistic="pearson",
            row_ids='"SEG_ID#SYS", e.g. "974#Human"',
            row_id=_candidate,
        ),
        # Accuracy against the human majority, per category (HC/HI/HM/MM) and their mean.
        JudgmentSet(
            name="pascal50s",
            path="pair_pascal.mat with consensus_pascal.mat (pascal50S.mat) beside it, or the JSON",
            read=_read_pascal50s,
            kind=JudgmentKind.VOTED_PAIRS,
            statistic="mean",
            row_ids='"{PAIR}a" or "{PAIR}b": the pair\'s 0-based position in the file, its side',
        ),
        # Kendall τc over the 1-5 ratings, as for Flickr8k-Expert.
        JudgmentSet(
            name="composite",
            path="an AMT result CSV (needs references)",
            read=_read_composite,
            kind=JudgmentKind.ABSOLUTE,
            statistic="tau_c",
            row_ids='"IMAGE#K": the image file name and the caption\'s slot k',
            row_id=_candidate,
        ),
        # Kendall τc over all rows, references as given (DENEB's test set; CaptionEvalKit).
        JudgmentSet(
            name="nebula",
            path="the Nebula JSON file (rows of imgid, mt, refs, score)",
            read=_read_nebula,
            kind=JudgmentKind.ABSOLUTE,
            statistic="tau_c",
            row_ids='"N": the row\'s 0-based position in the file',
            row_id=_candidate,
        ),
        # Share of pairs where the metric scores the better caption above the worse.
        JudgmentSet(
            name="pairs",
            path="JSON (lines) of {references, better, worse[, id, category, image]}",
            read=_read_pairs,
            kind=JudgmentKind.BETTER_WORSE,
            statistic="accuracy",
            row_ids='"{PAIR}a" (better) or "{PAIR}b" (worse): the pair\'s 0-based position',
        ),
        # A user's own absolute set; Kendall τc over its rows.
        JudgmentSet(
            name="csv",
            path="a CSV with mt, refs and score columns (imgid/img/image groups rows)",
            read=_read_csv,
            kind=JudgmentKind.ABSOLUTE,
            statistic="tau_c",
            row_ids='"N": the row\'s 0-based position in the file',
            row_id=_candidate,
        ),
        # The world's rule-based candidate quality; the judgments evaluator builds it.
        JudgmentSet(
            name="shapes_world",
            path="none: built from the run's shapes world",
            read=None,
            kind=JudgmentKind.ABSOLUTE,
            statistic="tau_c",
            row_ids="\"IMAGE:K\": the world's image id and the candidate's number",
            row_id=_candidate,
        ),
    )
}
# The sets read from their authors' files: the ones a path can be given for.
PUBLISHED_SETS = tuple(name for name, s in JUDGMENT_SETS.items() if s.read is not None)


def judgment_set(name: str) -> JudgmentSet:
    """The registry entry of ``name``; an unknown name is an error that lists the known ones."""
    if name not in JUDGMENT_SETS:
        raise ValueError(f"unknown judgment set {name!r}; known: {', '.join(JUDGMENT_SETS)}")
    return JUDGMENT_SETS[name]


def load_references(path: str | Path) -> dict[str, list[str]]:
    """image id -> captions, from a references JSON or a Flickr8k token file."""
    if Path(path).suffix == ".json":
        return read_references_json(path)
    refs: dict[str, list[str]] = {}
    for caption_id, caption in read_flickr8k_tokens(path).items():
        image = split_flickr8k_id(caption_id)
        refs.setdefault(image[0] if image else caption_id, []).append(caption)
    return refs


def load_set(name: str, path: str | Path, references: str | Path | None = None) -> JudgmentList:
    """The judgments of one published set (its entry's ``path`` says what ``path`` is)."""
    spec = judgment_set(name)
    if spec.read is None:
        raise ValueError(f"judgment set {name!r} is not read from files ({spec.path})")
    return spec.read(Path(path), load_references(references) if references else None)
