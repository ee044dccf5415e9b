"""PASCAL-50S (Vedantam et al., 2015): caption pairs with human preference votes.

The CIDEr release ships the MATLAB files ``pair_pascal.mat`` (the pairs, their
categories and, in ``result``, each pair's own 10 or 11 votes), ``consensus_pascal.mat``
(48 triplet votes per pair, where a copy has it) and ``pascal50S.mat`` (the 50 reference
sentences of each of the 1,000 images, in its variable ``refs``: a 1x1000 struct array
of ``image``, e.g. ``2008_006488.jpg``, and ``sent``, a 1x50 cell of strings).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.io

from capsim.data.judgments import PairJudgment
from capsim.errors import DataFormatError

PASCAL_CATEGORIES = {1: "HC", 2: "HI", 3: "HM", 4: "MM"}
PASCAL_CONSENSUS_FILE = "consensus_pascal.mat"
PASCAL_REFERENCES_FILE = "pascal50S.mat"
PASCAL_PAIRS_FILE = "pair_pascal.mat"
VOTE_FOR_B = 1  # a triplet's winner field: 1 means its B sentence, -1 its C sentence
VOTE_FOR_C = -1
PAIR_VOTES = "result"  # pair_pascal.mat's own votes: per pair, +1 for sentence a, -1 for b
# pascal50S.mat's references: ``refs`` as released; some copies name it train_sent_final.
REFERENCE_VARIABLES = ("refs", "train_sent_final")


def _mat_value(value: Any) -> Any:
    """A Python scalar or str out of MATLAB's nested 1x1 cell/char/number wrappers."""
    while isinstance(value, np.ndarray):
        if value.size != 1:
            raise ValueError(f"expected a single value, found an array of shape {value.shape}")
        value = value.reshape(-1)[0]
    return value.item() if isinstance(value, np.generic) else value


def _mat_record(value: Any, n_fields: int) -> list[Any]:
    """The fields of one struct element or cell row, whichever layout the file uses."""
    while (
        isinstance(value, np.ndarray)
        and value.size == 1
        and (value.dtype == object or value.dtype.names)
    ):
        value = value.reshape(-1)[0]
    if isinstance(value, np.void):
        fields = [value[index] for index in range(len(value))]
    elif isinstance(value, np.ndarray):
        fields = list(value.reshape(-1))
    else:
        raise ValueError(f"expected a struct or cell of {n_fields} fields, found {type(value)}")
    if len(fields) != n_fields:
        raise ValueError(f"expected {n_fields} fields, found {len(fields)}")
    return [_mat_value(field) for field in fields]


def _load_mat(
    path: str | Path, keys: Sequence[str], optional: Sequence[str] = ()
) -> dict[str, np.ndarray]:
    """The variables ``keys`` (each required) and those of ``optional`` the file holds."""
    try:
        contents = scipy.io.loadmat(str(path))
    except FileNotFoundError as error:
        raise DataFormatError(path, "file does not exist") from error
    except Exception as error:
        raise DataFormatError(
            path, f"not a readable MATLAB .mat file ({type(error).__name__}: {error})"
        ) from error
    missing = [key for key in keys if key not in contents]
    if missing:
        raise DataFormatError(path, f"missing variables {missing}")
    return {key: contents[key] for key in (*keys, *optional) if key in contents}


def _pascal_votes(
    consensus_path: str | Path, pairs: list[tuple[str, str, str]], pairs_path: str | Path
) -> tuple[list[float], list[tuple[str, ...]]]:
    """Per pair: the fraction of triplet votes for candidate a, and the triplets' references."""
    triplets = _load_mat(consensus_path, ["triplets"])["triplets"].reshape(-1)
    if not pairs or len(triplets) % len(pairs):
        raise DataFormatError(
            consensus_path,
            f"{len(triplets)} triplets do not split evenly over the {len(pairs)} pairs of {pairs_path}",
        )
    per_pair = len(triplets) // len(pairs)
    preferences, references = [], []
    for index, (_, a, b) in enumerate(pairs):
        votes_a, refs = 0, []
        for offset in range(index * per_pair, (index + 1) * per_pair):
            try:
                ref, first, second, winner = _mat_record(triplets[offset], 4)
                ref, first, second = ref.strip(), first.strip(), second.strip()
            except (ValueError, AttributeError) as error:
                raise DataFormatError(consensus_path, f"triplet {offset}: {error}") from error
            if {first, second} != {a, b} or winner not in (VOTE_FOR_B, VOTE_FOR_C):
                raise DataFormatError(
                    consensus_path,
                    f"triplet {offset} ({first!r} vs {second!r}, winner {winner!r}) does not "
                    f"match pair {index} of {pairs_path} ({a!r} vs {b!r}) with a winner of 1 or -1",
                )
            chosen = first if winner == VOTE_FOR_B else second
            votes_a += chosen == a
            refs.append(ref)
        preferences.append(votes_a / per_pair)
        references.append(tuple(refs))
    return preferences, references


def _pair_votes(mat_path: str | Path, n_pairs: int) -> list[float]:
    """Per pair: the fraction of the votes in ``pair_pascal.mat``'s own ``result`` (a
    struct a pair, its field ``result`` holding +1 for sentence a, -1 for b) that prefer a.

    Raises:
        DataFormatError: no ``result``, another number of entries than pairs, or a pair
            without votes or with a vote other than +1 or -1 (named by its index).
    """
    contents = _load_mat(mat_path, [], optional=[PAIR_VOTES])
    if PAIR_VOTES not in contents:
        raise DataFormatError(
            Path(mat_path).with_name(PASCAL_CONSENSUS_FILE),
            f"file does not exist, and {Path(mat_path).name} holds no {PAIR_VOTES!r} votes",
        )
    entries = contents[PAIR_VOTES].reshape(-1)
    if len(entries) != n_pairs:
        raise DataFormatError(mat_path, f"{len(entries)} {PAIR_VOTES} entries for {n_pairs} pairs")
    preferences = []
    for index, entry in enumerate(entries):
        try:
            votes = entry[PAIR_VOTES] if entry.dtype.names else entry
            votes = np.asarray(
                [_mat_value(v) for v in np.asarray(votes, dtype=object).reshape(-1)], dtype=float
            ).reshape(-1)
        except (ValueError, TypeError, KeyError, IndexError) as error:
            raise DataFormatError(mat_path, f"{PAIR_VOTES} of pair {index}: {error}") from error
        if votes.size == 0 or not np.isin(votes, (VOTE_FOR_B, VOTE_FOR_C)).all():
            raise DataFormatError(
                mat_path, f"{PAIR_VOTES} of pair {index}: votes {votes.tolist()} are not +1 or -1"
            )
        preferences.append(float(np.mean(votes == VOTE_FOR_B)))
    return preferences


def pascal_votes_file(mat_path: str | Path, consensus_path: str | Path | None = None) -> Path:
    """The file whose votes ``read_pascal50s`` reads: ``consensus_pascal.mat`` where it
    is (given, or beside ``mat_path``), else ``pair_pascal.mat`` itself (its ``result``)."""
    consensus = Path(consensus_path or Path(mat_path).with_name(PASCAL_CONSENSUS_FILE))
    return consensus if consensus_path or consensus.exists() else Path(mat_path)


def read_pascal50s_references(path: str | Path) -> dict[str, tuple[str, ...]]:
    """``pascal50S.mat``: ``refs`` as released (or ``train_sent_final``, as some copies
    name it), per image a struct of ``image`` (its file name or address) and ``sent`` (its
    50 sentences), keyed by the image's file name."""
    contents = _load_mat(path, [], optional=REFERENCE_VARIABLES)
    variable = next((name for name in REFERENCE_VARIABLES if name in contents), None)
    if variable is None:
        raise DataFormatError(path, f"missing variables: one of {list(REFERENCE_VARIABLES)}")
    references = {}
    for index, element in enumerate(contents[variable].reshape(-1)):
        try:
            image, sentences = element["image"], element["sent"]
            name = Path(str(_mat_value(image)).strip()).name
            texts = tuple(str(_mat_value(s)).strip() for s in np.asarray(sentences).reshape(-1))
        except (ValueError, KeyError, IndexError) as error:
            raise DataFormatError(path, f"image {index}: {error}") from error
        if not name or not texts or not all(texts):
            raise DataFormatError(path, f"image {index}: no file name or an empty sentence")
        references[name] = texts
    return references


def read_pascal50s(
    mat_path: str | Path,
    references: Mapping[str, Sequence[str]] | None = None,
    *,
    consensus_path: str | Path | None = None,
) -> list[PairJudgment]:
    """PASCAL-50S caption pairs with the fraction of human votes preferring candidate a.

    ``pair_pascal.mat`` holds ``new_input`` (per pair: image file name, caption
    a, caption b), ``category`` (1..4 = HC, HI, HM, MM) and ``new_data`` (the
    two captions' sources, unused here). The human votes are read from
    ``consensus_pascal.mat`` when it is given or beside ``mat_path``: ``triplets``, 48
    per pair in pair order, each (reference A, sentence B, sentence C, winner) where
    winner 1 picks B and -1 picks C. Without it, as the file is released, they are
    ``pair_pascal.mat``'s own ``result``: 11 votes a pair (10 for six pairs), +1 for
    caption a and -1 for b (``pascal_votes_file`` says which was read). References are
    ``references`` (image file name -> captions) when given, else the 50 sentences of
    ``pascal50S.mat`` beside ``mat_path`` when it is there, else the triplets' A
    sentences.

    Raises:
        DataFormatError: a file that is missing or malformed, named with the pair or
            triplet at fault; votes from ``result`` with no references to score against.
    """
    mat = _load_mat(mat_path, ["new_input", "category"])
    pairs = []
    for index, element in enumerate(mat["new_input"].reshape(-1)):
        try:
            image, a, b = (str(field).strip() for field in _mat_record(element, 3))
        except ValueError as error:
            raise DataFormatError(mat_path, f"new_input pair {index}: {error}") from error
        pairs.append((image, a, b))
    codes = mat["category"].reshape(-1)
    if len(codes) != len(pairs):
        raise DataFormatError(mat_path, f"{len(codes)} categories for {len(pairs)} pairs")
    categories = []
    for index, code in enumerate(codes):
        if int(code) not in PASCAL_CATEGORIES:
            raise DataFormatError(mat_path, f"pair {index} has category {code!r}, not 1..4")
        categories.append(PASCAL_CATEGORIES[int(code)])

    votes_file = pascal_votes_file(mat_path, consensus_path)
    if votes_file == Path(mat_path):
        preferences, vote_references = _pair_votes(mat_path, len(pairs)), None
    else:
        preferences, vote_references = _pascal_votes(votes_file, pairs, mat_path)
    beside = Path(mat_path).with_name(PASCAL_REFERENCES_FILE)
    if references is None and beside.exists():
        references = read_pascal50s_references(beside)
        pairs = [(Path(image).name, a, b) for image, a, b in pairs]
    if references is None and vote_references is None:
        raise DataFormatError(
            mat_path,
            f"its votes come without references: put {PASCAL_REFERENCES_FILE} (the 50 "
            f"sentences an image) or {PASCAL_CONSENSUS_FILE} beside it",
        )
    judgments = []
    for index, ((image, a, b), category) in enumerate(zip(pairs, categories, strict=True)):
        if references is None and vote_references is not None:
            image_refs = vote_references[index]
        elif image in references:
            image_refs = tuple(references[image])
        else:
            raise DataFormatError(
                mat_path,
                f"pair {index}: image {image!r} has no references ({beside.name} or given)",
            )
        judgments.append(PairJudgment(image, a, b, image_refs, preferences[index], category))
    return judgments
