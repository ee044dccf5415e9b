"""METEOR 1.5's English data, read from the user's pycocoevalcap install.

Nothing is vendored: the function words, nonbreaking prefixes and WordNet
synonym files are read from ``meteor-1.5.jar`` (a zip) and the paraphrase
table from ``data/paraphrase-en.gz``, both beside pycocoevalcap's
``meteor.py``. The paraphrase table (5.3M pairs) is turned once into a
compact index of 64-bit phrase hashes under the cache directory, keyed by
the source's size, mtime and sha256, and kept in-process after the first load.

A phrase's hash folds its words' hashes left to right (``fold``), so the compiled
matcher hashes every n-gram of a sentence incrementally, one word at a time, and
stops extending an n-gram as soon as no phrase of the table starts with it: the
index also holds the hash of every proper prefix of a phrase.
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
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

from capsim.cache import cache_dir
from capsim.metrics.meteor.normalize import parse_prefixes

INSTALL_HINT = "pip install pycocoevalcap==1.2  (a dependency of this repo's every install)"
JAR_NAME = "meteor-1.5.jar"
PARAPHRASE_NAME = "paraphrase-en.gz"
INDEX_VERSION = 3
_HASH_BYTES = 8
# What a key of the index is: a phrase of the table, a proper prefix of one, or both.
PHRASE, PREFIX = np.uint8(1), np.uint8(2)
FOLD_START = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S27, _S30, _S31 = np.uint64(27), np.uint64(30), np.uint64(31)
BUCKET_BITS = 20  # keys are found by their top 20 bits first (about 3 keys each), then bisected
BUCKET_SHIFT = np.uint64(64 - BUCKET_BITS)


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


def word_hash(word: str) -> int:
    """A stable 64-bit hash of one token (Python's hash() changes per process)."""
    return int.from_bytes(
        hashlib.blake2b(word.encode(), digest_size=_HASH_BYTES).digest(), "little"
    )


@numba.njit(cache=True, nogil=True)
def fold(state: np.uint64, word: np.uint64) -> np.uint64:
    """The hash of a phrase extended by one word: splitmix64's mix of the sum."""
    z = state + word
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@numba.njit(cache=True, nogil=True)
def _prefix_hashes(word_hashes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """[phrases, max words]: the hash of each phrase's first k + 1 words (0 past its end)."""
    out = np.zeros(word_hashes.shape, np.uint64)
    for row in range(word_hashes.shape[0]):
        state = FOLD_START
        for k in range(lengths[row]):
            state = fold(state, word_hashes[row, k])
            out[row, k] = state
    return out


def phrase_hashes(phrases: list[str]) -> np.ndarray:
    """Each phrase's hash, the fold of its space-separated words' hashes."""
    prefixes, lengths = _hashes_of(phrases)
    return prefixes[np.arange(len(phrases)), lengths - 1]


def _hashes_of(phrases: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The prefix hashes of ``phrases`` (see _prefix_hashes) and their word counts."""
    split = [phrase.split(" ") for phrase in phrases]
    lengths = np.fromiter(map(len, split), np.int64, len(split))
    hashes = {w: word_hash(w) for w in {w for words in split for w in words}}
    matrix = np.zeros((len(split), int(lengths.max(initial=1))), np.uint64)
    for row, words in enumerate(split):
        matrix[row, : len(words)] = [hashes[w] for w in words]
    return _prefix_hashes(matrix, lengths), lengths


class IndexArrays(NamedTuple):
    """The index as the compiled phrase finder reads it (see ParaphraseIndex)."""

    keys: np.ndarray
    kinds: np.ndarray
    buckets: np.ndarray
    max_words: int
    paraphrase_at: np.ndarray
    paraphrases: np.ndarray
    lines: np.ndarray


@dataclasses.dataclass(frozen=True)
class ParaphraseIndex:
    """The paraphrase table as sorted hashes: phrase i is the i-th smallest key.

    ``keys`` holds the hash of every phrase and of every proper prefix of one, and
    ``kinds`` says which each is (PHRASE, PREFIX or both). The paraphrases of phrase i
    are ``paraphrases[paraphrase_at[i]:paraphrase_at[i + 1]]`` (phrase ids, ascending),
    and ``lines`` holds each one's position in the table, which is the order in which
    the jar tries a phrase's paraphrases; ``table_lines`` is one more than the last
    line. ``buckets[b]`` is the first key whose top BUCKET_BITS bits are b.
    """

    keys: np.ndarray
    kinds: np.ndarray
    paraphrase_at: np.ndarray
    paraphrases: np.ndarray
    lines: np.ndarray
    max_words: int
    buckets: np.ndarray = dataclasses.field(init=False, repr=False)
    table_lines: int = dataclasses.field(init=False)
    arrays: IndexArrays = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        tops = (self.keys >> BUCKET_SHIFT).astype(np.intp)
        counts = np.bincount(tops, minlength=1 << BUCKET_BITS)
        buckets = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(counts, out=buckets[1:])
        object.__setattr__(self, "buckets", buckets)
        object.__setattr__(self, "table_lines", int(self.lines.max()) + 1 if len(self.lines) else 0)
        arrays = IndexArrays(
            *(np.asarray(a) for a in (self.keys, self.kinds, buckets)),
            self.max_words,
            *(np.asarray(a) for a in (self.paraphrase_at, self.paraphrases, self.lines)),
        )
        object.__setattr__(self, "arrays", arrays)

    def ids(self, hashes: np.ndarray) -> np.ndarray:
        """Index of each phrase hash among the keys, -1 where it is no phrase of the table."""
        found = np.minimum(np.searchsorted(self.keys, hashes), len(self.keys) - 1)
        listed = (self.keys[found] == hashes) & (self.kinds[found] & PHRASE > 0)
        return np.where(listed, found, -1)


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
    prefixes, lengths = _hashes_of(list(first_seen))
    phrases = prefixes[np.arange(len(lengths)), lengths - 1]
    if len(np.unique(phrases)) < len(phrases):
        raise MeteorResourceError(f"64-bit hash collision among the phrases of {source}")
    proper = prefixes[np.arange(prefixes.shape[1]) < lengths[:, None] - 1]
    keys = np.unique(np.concatenate([phrases, proper]))
    kinds = np.zeros(len(keys), np.uint8)
    kinds[np.searchsorted(keys, phrases)] |= PHRASE
    kinds[np.searchsorted(keys, proper)] |= PREFIX
    rank = np.searchsorted(keys, phrases).astype(np.uint64)
    size = np.uint64(len(keys))
    kept, first = np.unique(rank[src] * size + rank[tgt], return_index=True)  # first listing
    paraphrase_at = np.searchsorted(kept // size, np.arange(len(keys) + 1, dtype=np.uint64))
    return ParaphraseIndex(
        keys,
        kinds,
        paraphrase_at.astype(np.int64),
        (kept % size).astype(np.uint32),
        first.astype(np.uint32),
        int(lengths.max()),
    )


def _index_paths(folder: Path) -> tuple[Path, ...]:
    names = (
        "paraphrase-keys.npy",
        "paraphrase-kinds.npy",
        "paraphrase-at.npy",
        "paraphrase-targets.npy",
        "paraphrase-lines.npy",
        "paraphrase.json",
    )
    return tuple(folder / name for name in names)


@functools.cache
def paraphrase_index(source: Path) -> ParaphraseIndex:
    """The cached index of ``source``, rebuilt when the source file changed."""
    folder = cache_dir() / f"meteor-v{INDEX_VERSION}"
    index = _cached_index(folder, source)
    if index is not None:
        return index
    with _one_builder(folder):
        index = _cached_index(folder, source)  # built by another process meanwhile
        if index is not None:
            return index
        index = _build_index(source)
        try:
            _save_index(index, folder, source, source.stat())
        except OSError as error:  # a read-only cache: keep the index for this process only
            warnings.warn(f"METEOR paraphrase index not cached in {folder}: {error}", stacklevel=2)
    return index


def _cached_index(folder: Path, source: Path) -> ParaphraseIndex | None:
    """The index saved in ``folder`` if it was built from ``source`` as it is now."""
    *arrays, manifest_path = _index_paths(folder)
    stat = source.stat()
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    fresh = manifest.get("size") == stat.st_size and manifest.get("mtime_ns") == stat.st_mtime_ns
    if manifest and not fresh and manifest.get("sha256") == _sha256(source):
        fresh = True  # touched, not changed: remember its new mtime (best effort)
        with contextlib.suppress(OSError):
            manifest_path.write_text(
                json.dumps({**manifest, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})
            )
    if fresh and all(p.is_file() for p in arrays):
        return ParaphraseIndex(
            *(np.load(p, mmap_mode="r") for p in arrays), int(manifest["max_words"])
        )
    return None


@contextlib.contextmanager
def _one_builder(folder: Path) -> Iterator[None]:
    """One builder at a time per cache folder: another process (a pytest-xdist worker, a
    parallel job) waits for the first one's index and loads it instead of building it again
    (about 45 s). Without a lock (no fcntl, a read-only cache) builders run side by side,
    which is safe: each file is written atomically."""
    try:
        import fcntl

        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / "build.lock", "a")  # noqa: SIM115 (held across the yield)
    except (ImportError, OSError):
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _save_index(index: ParaphraseIndex, folder: Path, source: Path, stat: os.stat_result) -> None:
    """Writes the index and its manifest, each file atomically (concurrent builders are safe)."""
    *arrays, manifest_path = _index_paths(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fields = (index.keys, index.kinds, index.paraphrase_at, index.paraphrases, index.lines)
    saved = zip(arrays, fields, strict=True)
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
