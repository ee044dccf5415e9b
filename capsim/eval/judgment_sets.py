"""The human-judgment sets, one registry entry each.

An entry says all there is to know about a set: what its path is, how it is read, what
kind of judgment the humans gave (its ``kind``, an object of
``capsim.eval.judgment_kinds``, which scoring, the report and the significance tests ask
how to treat the set), the statistic that heads its report and what its human labels
are. The harness (``capsim.eval.judgment_harness``), the ``judgments`` evaluator and
``python -m capsim.metaeval`` read the sets from ``JUDGMENT_SETS`` only and carry the
entry with the set, so adding a set is one entry here (and its test), and adding a kind
one class in ``capsim.eval.judgment_kinds``.
"""

from __future__ import annotations

import dataclasses
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
from capsim.data.judgments import Judgment, LabelJudgment, PairJudgment
from capsim.data.pascal50s import PASCAL_PAIRS_FILE, pascal_votes_file, read_pascal50s
from capsim.errors import DataFormatError
from capsim.eval.judgment_kinds import (
    ABSOLUTE,
    BETTER_WORSE,
    CAPTION_LABELS,
    VOTED_PAIRS,
    JudgmentKind,
)

References = Mapping[str, list[str]]  # image id -> reference captions
JudgmentList = list[Judgment] | list[PairJudgment] | list[LabelJudgment]


@dataclasses.dataclass(frozen=True)
class JudgmentSet:
    """One human-judgment set, scored with its statistic as its authors published it.

    ``path``: what the path given for the set is. ``read(path, references)``:
    its judgments, ``references`` being the user's (image id -> captions) or
    None; ``read`` is None for a set built in-process rather than read from
    files. ``kind``: what the humans gave (a ``JudgmentKind`` object). ``statistic``: the
    report key that heads the set, one of its kind's ``statistics``: ``tau_c``, ``tau_b``
    or ``pearson`` over rating rows for absolute sets, ``mean`` (accuracy averaged over
    categories) for voted pairs, ``accuracy`` for better-worse pairs, ``auroc`` for
    labelled captions. ``row_ids``: what names a rated candidate (the keys of ``--scores``
    files), and ``row_id`` computes it from a judgment of an absolute set (pair sets are
    keyed ``{pair}{a|b}``, labelled captions by their position). ``labels``, where a set's
    files may bring different human labels: which ones a path brings (the report's
    ``labels``).
    """

    name: str
    path: str
    read: Callable[[Path, References | None], JudgmentList] | None
    kind: JudgmentKind
    statistic: str
    row_ids: str
    row_id: Callable[[Judgment], str] | None = None
    labels: Callable[[Path], str] | None = None

    def __post_init__(self) -> None:
        if self.statistic not in self.kind.statistics:
            raise ValueError(
                f"judgment set {self.name!r}: a {self.kind.name} set's statistic is one of "
                f"{list(self.kind.statistics)}, not {self.statistic!r}"
            )


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


def _pascal50s_file(path: Path) -> tuple[Path, bool]:
    """(the file a PASCAL-50S path names, whether it is the JSON layout): decided here
    alone, for reading and for saying which labels it brings."""
    path = path / PASCAL_PAIRS_FILE if path.is_dir() else path
    return path, _is_json(path)


def _read_pascal50s(path: Path, references: References | None) -> list[PairJudgment]:
    path, is_json = _pascal50s_file(path)
    if is_json:
        return judgment_files.read_pascal50s_json(path)
    return read_pascal50s(path, references)


def pascal50s_labels(path: str | Path) -> str:
    """Which human labels a PASCAL-50S path brings: the JSON's, the 48 triplet votes of
    consensus_pascal.mat, or pair_pascal.mat's own votes (as released, without it)."""
    path, is_json = _pascal50s_file(Path(path))
    if is_json:
        return "the JSON file's label field (one preferred caption a pair)"
    if pascal_votes_file(path) == path:
        return "the majority of a pair's 10-11 votes in pair_pascal.mat's result (ties left out)"
    return "the majority of the 48 votes a pair in consensus_pascal.mat (ties left out)"


def _read_pairs(path: Path, references: References | None) -> list[PairJudgment]:
    del references  # each row holds its own
    return judgment_files.read_caption_pairs(path)


def _read_foil_nocaps(path: Path, references: References | None) -> list[PairJudgment]:
    del references  # each row holds its own
    return judgment_files.read_foil_nocaps(path)


def _read_hat(path: Path, references: References | None) -> list[LabelJudgment]:
    del references  # each row holds its own
    return judgment_files.read_hat(path)


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
            kind=ABSOLUTE,
            statistic="tau_c",
            row_ids='"QUERY.jpg CAPTION.jpg#N": the first two columns, space-joined',
            row_id=_image_and_candidate,
        ),
        # Kendall τb over the fraction of "yes" votes, which ties heavily.
        JudgmentSet(
            name="flickr8k_cf",
            path="a folder with CrowdFlowerAnnotations.txt and Flickr8k.token.txt",
            read=_read_flickr8k_cf,
            kind=ABSOLUTE,
            statistic="tau_b",
            row_ids='"QUERY.jpg CAPTION.jpg#N": the first two columns, space-joined',
            row_id=_image_and_candidate,
        ),
        # Pearson over rows, plus system-level agreement across its captioning systems.
        JudgmentSet(
            name="thumb",
            path="mscoco_THumB-1.0.jsonl, with mscoco_references.json beside it",
            read=_read_thumb,
            kind=ABSOLUTE,
            statistic="pearson",
            row_ids='"SEG_ID#SYS", e.g. "974#Human"',
            row_id=_candidate,
        ),
        # Accuracy against the human majority, per category (HC/HI/HM/MM) and their mean.
        JudgmentSet(
            name="pascal50s",
            path="pair_pascal.mat with consensus_pascal.mat (pascal50S.mat) beside it, or the JSON",
            read=_read_pascal50s,
            kind=VOTED_PAIRS,
            statistic="mean",
            row_ids='"{PAIR}a" or "{PAIR}b": the pair\'s 0-based position in the file, its side',
            labels=pascal50s_labels,
        ),
        # Kendall τc over the 1-5 ratings, as for Flickr8k-Expert.
        JudgmentSet(
            name="composite",
            path="an AMT result CSV (needs references)",
            read=_read_composite,
            kind=ABSOLUTE,
            statistic="tau_c",
            row_ids='"IMAGE#K": the image file name and the caption\'s slot k',
            row_id=_candidate,
        ),
        # Kendall τc over all rows, references as given (DENEB's test set; CaptionEvalKit).
        JudgmentSet(
            name="nebula",
            path="the Nebula JSON file (rows of imgid, mt, refs, score)",
            read=_read_nebula,
            kind=ABSOLUTE,
            statistic="tau_c",
            row_ids='"N": the row\'s 0-based position in the file',
            row_id=_candidate,
        ),
        # Share of pairs where the metric scores the better caption above the worse.
        JudgmentSet(
            name="pairs",
            path="JSON (lines) of {references, better, worse[, id, category, image]}",
            read=_read_pairs,
            kind=BETTER_WORSE,
            statistic="accuracy",
            row_ids='"{PAIR}a" (better) or "{PAIR}b" (worse): the pair\'s 0-based position',
        ),
        # FOIL-nocaps as ALOHa ships it: baseline over foil, all 9 references; per domain.
        JudgmentSet(
            name="foil_nocaps",
            path="foil_nocaps JSON list of {image_path, references, baseline, foil, domain}",
            read=_read_foil_nocaps,
            kind=BETTER_WORSE,
            statistic="accuracy",
            row_ids='"{PAIR}a" (baseline) or "{PAIR}b" (foil): the row\'s 0-based position',
        ),
        # HAT as ALOHa ships it: one label a caption; AUROC and average precision.
        JudgmentSet(
            name="hat",
            path="HAT JSON list of {caption, references, contains_hallucination, image_path}",
            read=_read_hat,
            kind=CAPTION_LABELS,
            statistic="auroc",
            row_ids='"N": the caption\'s 0-based position in the file',
        ),
        # A user's own absolute set; Kendall τc over its rows.
        JudgmentSet(
            name="csv",
            path="a CSV with mt, refs and score columns (imgid/img/image groups rows)",
            read=_read_csv,
            kind=ABSOLUTE,
            statistic="tau_c",
            row_ids='"N": the row\'s 0-based position in the file',
            row_id=_candidate,
        ),
        # The world's rule-based candidate quality; the judgments evaluator builds it.
        JudgmentSet(
            name="shapes_world",
            path="none: built from the run's shapes world",
            read=None,
            kind=ABSOLUTE,
            statistic="tau_c",
            row_ids="\"IMAGE:K\": the world's image id and the candidate's number",
            row_id=_candidate,
        ),
    )
}


def published_sets() -> tuple[str, ...]:
    """The sets read from files, the ones a path can be given for (read from the registry
    as it is now, so that an entry added at run time is one too)."""
    return tuple(name for name, entry in JUDGMENT_SETS.items() if entry.read is not None)


def as_judgment_set(spec: JudgmentSet | str) -> JudgmentSet:
    """``spec`` itself, or the registry entry of the name ``spec``: a door that takes a
    name (``score_set``, ``load_set``) resolves it here, once, and passes the entry on."""
    return spec if isinstance(spec, JudgmentSet) else judgment_set(spec)


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


def load_set(
    spec: JudgmentSet | str, path: str | Path, references: str | Path | None = None
) -> JudgmentList:
    """The judgments of one published set, its entry or its name (the entry's ``path``
    says what ``path`` is)."""
    spec = as_judgment_set(spec)
    if spec.read is None:
        raise ValueError(f"judgment set {spec.name!r} is not read from files ({spec.path})")
    return spec.read(Path(path), load_references(references) if references else None)
