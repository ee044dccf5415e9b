"""METEOR 1.5's English data, read from the user's pycocoevalcap install.

Nothing is vendored: the function words, nonbreaking prefixes and WordNet
synonym files are read from ``meteor-1.5.jar`` (a zip) and the paraphrase
table from ``data/paraphrase-en.gz``, both beside pycocoevalcap's
``meteor.py``. The paraphrase table (5.3M pairs) is turned once into a
compact index of 64-bit phrase hashes under the cache directory, keyed by
the source's size, mtime and sha256, and kept in-process after the first load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gzip
import hashlib
import importlib.util
import json
import os
import warnings
import zipfile
from pathlib import Path

import numpy as np

from capsim.cache import cache_dir
from capsim.eval.meteor.normalize import parse_prefixes

INSTALL_HINT = "pip install pycocoevalcap==1.2  (the [baselines] extra of this repo)"
JAR_NAME = "meteor-1.5.jar"
PARAPHRASE_NAME = "paraphrase-en.gz"
INDEX_VERSION = 2
_HASH_BYTES = 8


class MeteorResourceError(RuntimeError):
    """METEOR's data files (pycocoevalcap's jar and paraphrase table) are missing."""


@dataclasses.dataclass(frozen=True)
class MeteorFiles:
    """Where pycocoevalcap keeps METEOR: the jar (a zip of its data) and the paraphrase table."""

    jar: Path
    paraphrases: Path


def locate_files() -> MeteorFiles:
    """Finds meteor-1.5.jar and paraphrase-en.gz in the installed pycocoevalcap."""
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise MeteorResourceError(f"METEOR needs pycocoevalcap's data files: {INSTALL_HINT}")
    folder = Path(next(iter(spec.submodule_search_locations))) / "meteor"
    files = MeteorFiles(folder / JAR_NAME, folder / "data" / PARAPHRASE_NAME)
    for path in (files.jar, files.paraphrases):
        if not path.is_file():
            raise MeteorResourceError(f"{path} is missing; reinstall with: {INSTALL_HINT}")
    return files


def phrase_hashes(phrases: list[str]) -> np.ndarray:
    """Stable 64-bit hashes of token strings (Python's hash() changes per process)."""
    digest = hashlib.blake2b
    return np.array(
        [
            int.from_bytes(digest(p.encode(), digest_size=_HASH_BYTES).digest(), "little")
            for p in phrases
        ],
        dtype=np.uint64,
    )


@dataclasses.dataclass(frozen=True)
class ParaphraseIndex:
    """The paraphrase table as sorted hashes: phrase i is the i-th smallest hash.

    ``pairs`` holds ``source * len(hashes) + target`` for every (source ->
    target) line of the table, sorted, so a phrase's paraphrases are one
    contiguous slice; ``lines`` holds each pair's position in the table, which
    is the order in which the jar tries a phrase's paraphrases.
    """

    hashes: np.ndarray
    pairs: np.ndarray
    lines: np.ndarray
    max_words: int

    def ids(self, phrase_hashes_: np.ndarray) -> np.ndarray:
        """Index of each hash among the table's phrases, -1 where absent."""
        found = np.searchsorted(self.hashes, phrase_hashes_)
        found = np.minimum(found, len(self.hashes) - 1)
        return np.where(self.hashes[found] == phrase_hashes_, found, -1)

    def links(self, phrases: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source, target, table line) of every listed pair among phrase ids ``phrases``."""
        phrases = np.unique(phrases).astype(np.uint64)
        size = np.uint64(len(self.hashes))
        starts = np.searchsorted(self.pairs, phrases * size)
        stops = np.searchsorted(self.pairs, (phrases + np.uint64(1)) * size)
        counts = stops - starts
        at = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        sources = np.repeat(phrases, counts)
        targets = self.pairs[at] - sources * size
        kept = np.isin(targets, phrases, assume_unique=False)
        return sources[kept], targets[kept], self.lines[at[kept]]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(functools.partial(handle.read, 1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _build_index(source: Path) -> ParaphraseIndex:
    """Parses the table (probability, phrase, paraphrase: three lines each)."""
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    count = (len(lines) - 1) // 3 if lines[-1] == "" else len(lines) // 3
    first_seen: dict[str, int] = {}
    number = lambda phrase: first_seen.setdefault(phrase, len(first_seen))  # noqa: E731
    src = np.fromiter(map(number, lines[1 : 3 * count : 3]), np.int64, count)
    tgt = np.fromiter(map(number, lines[2 : 3 * count : 3]), np.int64, count)
    phrases = list(first_seen)
    hashes = phrase_hashes(phrases)
    order = np.argsort(hashes, kind="stable")
    if np.any(np.diff(hashes[order]) == 0):
        raise MeteorResourceError(f"64-bit hash collision among the phrases of {source}")
    rank = np.empty(len(phrases), dtype=np.uint64)
    rank[order] = np.arange(len(phrases), dtype=np.uint64)
    keys = rank[src] * np.uint64(len(phrases)) + rank[tgt]
    kept, first = np.unique(keys, return_index=True)  # a pair listed twice keeps its first line
    max_words = max(p.count(" ") + 1 for p in phrases)
    return ParaphraseIndex(hashes[order], kept, first.astype(np.uint32), max_words)


def _index_paths(folder: Path) -> tuple[Path, Path, Path, Path]:
    names = (
        "paraphrase-hashes.npy",
        "paraphrase-pairs.npy",
        "paraphrase-lines.npy",
        "paraphrase.json",
    )
    return tuple(folder / name for name in names)


@functools.cache
def paraphrase_index(source: Path) -> ParaphraseIndex:
    """The cached index of ``source``, rebuilt when the source file changed."""
    folder = cache_dir() / f"meteor-v{INDEX_VERSION}"
    hashes_path, pairs_path, lines_path, manifest_path = _index_paths(folder)
    stat = source.stat()
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    fresh = manifest.get("size") == stat.st_size and manifest.get("mtime_ns") == stat.st_mtime_ns
    if manifest and not fresh and manifest.get("sha256") == _sha256(source):
        fresh = True  # touched, not changed: remember its new mtime (best effort)
        with contextlib.suppress(OSError):
            manifest_path.write_text(
                json.dumps({**manifest, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})
            )
    if fresh and all(p.is_file() for p in (hashes_path, pairs_path, lines_path)):
        return ParaphraseIndex(
            np.load(hashes_path, mmap_mode="r"),
            np.load(pairs_path, mmap_mode="r"),
            np.load(lines_path, mmap_mode="r"),
            int(manifest["max_words"]),
        )
    index = _build_index(source)
    try:
        _save_index(index, folder, source, stat)
    except OSError as error:  # a read-only cache: keep the index for this process only
        warnings.warn(f"METEOR paraphrase index not cached in {folder}: {error}", stacklevel=2)
    return index


def _save_index(index: ParaphraseIndex, folder: Path, source: Path, stat: os.stat_result) -> None:
    """Writes the index and its manifest, each file atomically (concurrent builders are safe)."""
    hashes_path, pairs_path, lines_path, manifest_path = _index_paths(folder)
    folder.mkdir(parents=True, exist_ok=True)
    saved = ((hashes_path, index.hashes), (pairs_path, index.pairs), (lines_path, index.lines))
    for path, array in saved:
        partial = path.with_suffix(f".{os.getpid()}.npy")
        np.save(partial, array)
        partial.replace(path)
    record = {
        "source": str(source),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "sha256": _sha256(source),
        "max_words": index.max_words,
    }
    partial_manifest = manifest_path.with_suffix(f".{os.getpid()}.json")
    partial_manifest.write_text(json.dumps(record, indent=1))
    partial_manifest.replace(manifest_path)


def _pairs_of_lines(text: str) -> dict[str, str]:
    lines = text.split("\n")
    return dict(zip(lines[0::2], lines[1::2], strict=False))


@dataclasses.dataclass(frozen=True)
class JarData:
    """The English files inside meteor-1.5.jar."""

    function_words: frozenset[str]
    prefixes: frozenset[str]
    numeric_prefixes: frozenset[str]
    synsets: dict[str, str]  # word -> space-separated WordNet synset ids
    exception_bases: dict[str, tuple[str, ...]]  # irregular form -> its base forms


@functools.cache
def jar_data(jar: Path) -> JarData:
    """Reads the function words, prefixes and WordNet files from the jar (a zip)."""
    with zipfile.ZipFile(jar) as archive:
        read = lambda name: archive.read(name).decode("utf-8")  # noqa: E731
        function_words = frozenset(w for w in read("function/english.words").split("\n") if w)
        prefixes, numeric = parse_prefixes(read("nonbreaking/english.prefixes"))
        synsets = _pairs_of_lines(read("synonym/english.synsets"))
        bases: dict[str, list[str]] = {}
        for base, forms in _pairs_of_lines(read("synonym/english.exceptions")).items():
            for form in forms.split():
                bases.setdefault(form, []).append(base)
    return JarData(
        function_words,
        prefixes,
        numeric,
        synsets,
        {form: tuple(dict.fromkeys(found)) for form, found in bases.items()},
    )
