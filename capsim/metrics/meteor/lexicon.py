"""What METEOR's matchers look up about words, memoised for the process: Snowball stems,
WordNet synsets and the hashes that find phrases of the paraphrase table (Lexicon)."""

from __future__ import annotations

import itertools
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
    """What the matchers need of a call's distinct words, one row per word."""

    stems: np.ndarray  # the stem's number, the same for the process
    function: np.ndarray  # a function word
    synset_at: np.ndarray  # word w's synsets are synsets[synset_at[w]:synset_at[w + 1]]
    synsets: np.ndarray  # numbered for the process
    hashes: np.ndarray  # resources.word_hash: how the paraphrase index knows the word


class Lexicon:
    """Stems, WordNet synsets and hashes of words, memoised for the process: one entry
    per word, so that a call looks each of its distinct words up once."""

    def __init__(self, data: JarData):
        self._data = data
        self._stemmer = snowballstemmer.stemmer("english")
        # word -> (stem number, function word, synset numbers, hash)
        self._entries: dict[str, tuple[int, bool, tuple[int, ...], int]] = {}
        self._stem_numbers: dict[str, int] = {}  # stems, numbered as met
        self._synset_numbers: dict[str, int] = {}  # WordNet's synset ids, numbered as met

    def tables(self, words: list[str]) -> WordTables:
        """The tables of ``words`` (distinct words, in the order of their rows)."""
        entries = self._entries
        found = [entries.get(word) or self._entry(word) for word in words]
        stems, function, synsets, hashes = zip(*found, strict=True) if found else ((),) * 4
        synset_at = np.zeros(len(words) + 1, np.int64)
        np.cumsum([len(numbers) for numbers in synsets], out=synset_at[1:])
        return WordTables(
            np.array(stems, np.int64),
            np.array(function, np.bool_),
            synset_at,
            np.fromiter(itertools.chain.from_iterable(synsets), np.int64, synset_at[-1]),
            np.array(hashes, np.uint64),
        )

    def _entry(self, word: str) -> tuple[int, bool, tuple[int, ...], int]:
        stem = self._stemmer.stemWord(word)
        number = self._synset_numbers.setdefault
        synsets = tuple(
            sorted(number(s, len(self._synset_numbers)) for s in self._lookup_synsets(word))
        )
        entry = (
            self._stem_numbers.setdefault(stem, len(self._stem_numbers)),
            word in self._data.function_words,
            synsets,
            word_hash(word),
        )
        self._entries[word] = entry
        return entry

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
