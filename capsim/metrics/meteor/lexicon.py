"""What METEOR's matchers look up about words, memoised for the process: Snowball stems,
WordNet synsets and the hashes that find phrases of the paraphrase table (Lexicon)."""

from __future__ import annotations

import itertools
import threading
from typing import NamedTuple

import numpy as np
import snowballstemmer

from capsim.metrics.meteor.resources import JarData, word_hash

# WordNet's detachment rules (nouns, verbs, adjectives), tried in this order.
MORPHY_RULES = (
    ("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
    ("men", "man"), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
    ("ing", "e"), ("ing", ""), ("er", ""), ("est", ""), ("er", "e"), ("est", "e"),
)  # fmt: skip
# WordNet leaves short words and nouns in -ss alone ("as", "glass", "discuss").
MORPHY_MIN_LENGTH = 3


class WordTables(NamedTuple):
    """What the matchers need of the words, one row per word id."""

    stems: np.ndarray  # the stem's number
    function: np.ndarray  # a function word
    synset_at: np.ndarray  # word w's synsets are synsets[synset_at[w]:synset_at[w + 1]]
    synsets: np.ndarray  # WordNet's synsets, numbered as met
    hashes: np.ndarray  # resources.word_hash: how the paraphrase index knows the word


class Lexicon:
    """Stems, WordNet synsets and hashes of words, looked up once per word for the process:
    each word met gets an id and a row of tables that only grow, so that a call gathers
    nothing per word beyond the ids of its distinct words."""

    def __init__(self, data: JarData):
        self._data = data
        self._stemmer = snowballstemmer.stemmer("english")
        self._ids: dict[str, int] = {}  # words, numbered as met
        self._lock = threading.Lock()
        self._stem_numbers: dict[str, int] = {}  # stems, numbered as met
        self._synset_numbers: dict[str, int] = {}  # WordNet's synset ids, numbered as met
        # The tables' rows (and synsets) are the first _words (and synset_at[_words]) of
        # arrays with room to grow: a view handed out stays valid as they grow.
        self._words = 0
        self._stems = np.empty(0, np.int64)
        self._function = np.empty(0, np.bool_)
        self._hashes = np.empty(0, np.uint64)
        self._synset_at = np.zeros(1, np.int64)
        self._synsets = np.empty(0, np.int64)

    def ids(self, words: list[str]) -> np.ndarray:
        """The ids of ``words`` (distinct words), the ones not met before looked up now."""
        known = self._ids
        found = [known.get(word, -1) for word in words]
        new = [word for word, number in zip(words, found, strict=True) if number < 0]
        if new:
            with self._lock:  # one caller at a time adds words
                self._add([word for word in new if word not in known])
            found = [known[word] for word in words]
        return np.array(found, np.int64)

    def tables(self) -> WordTables:
        """The tables of every word met so far, by id."""
        words = self._words
        return WordTables(
            self._stems[:words],
            self._function[:words],
            self._synset_at[: words + 1],
            self._synsets[: self._synset_at[words]],
            self._hashes[:words],
        )

    def _add(self, words: list[str]) -> None:
        if not words:
            return
        first, last = self._words, self._words + len(words)
        synsets = [self._synset_ids(word) for word in words]
        counts = np.array([len(found) for found in synsets], np.int64)
        synsets_end = self._synset_at[first] + int(counts.sum())
        self._stems = _with_room(self._stems, last)
        self._function = _with_room(self._function, last)
        self._hashes = _with_room(self._hashes, last)
        self._synset_at = _with_room(self._synset_at, last + 1)
        self._synsets = _with_room(self._synsets, synsets_end)
        stem = self._stem_numbers.setdefault
        self._stems[first:last] = [
            stem(self._stemmer.stemWord(w), len(self._stem_numbers)) for w in words
        ]
        self._function[first:last] = [w in self._data.function_words for w in words]
        self._hashes[first:last] = [word_hash(w) for w in words]
        self._synset_at[first + 1 : last + 1] = self._synset_at[first] + np.cumsum(counts)
        self._synsets[self._synset_at[first] : synsets_end] = list(
            itertools.chain.from_iterable(synsets)
        )
        self._words = last  # first: a word's id is handed out only once its row is there
        self._ids.update(zip(words, range(first, last), strict=True))

    def _synset_ids(self, word: str) -> tuple[int, ...]:
        number = self._synset_numbers.setdefault
        return tuple(
            sorted(number(s, len(self._synset_numbers)) for s in self._lookup_synsets(word))
        )

    def _lookup_synsets(self, word: str) -> frozenset[str]:
        synsets, exceptions = self._data.synsets, self._data.exception_bases
        bases = [word] if word in synsets else []
        if word in exceptions:
            bases.extend(exceptions[word])
        elif len(word) >= MORPHY_MIN_LENGTH and not word.endswith("ss"):
            for suffix, replacement in MORPHY_RULES:
                if word.endswith(suffix):
                    base = word[: len(word) - len(suffix)] + replacement
                    if base in synsets:
                        bases.append(base)
                        break
        return frozenset(s for base in bases for s in synsets.get(base, "").split())


def _with_room(values: np.ndarray, size: int) -> np.ndarray:
    """``values``, or a copy twice as long, when it has fewer than ``size`` rows."""
    if size <= len(values):
        return values
    bigger = np.empty(max(size, 2 * len(values), 1024), values.dtype)
    bigger[: len(values)] = values
    return bigger
