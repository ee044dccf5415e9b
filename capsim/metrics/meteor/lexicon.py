"""What METEOR's matchers look up about words, memoised for the process: Snowball stems,
WordNet synsets and the hashes that find phrases of the paraphrase table (Lexicon)."""

from __future__ import annotations

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


class Lexicon:
    """Stems, WordNet synsets and hashes of words, memoised for the process."""

    def __init__(self, data: JarData):
        self._data = data
        self._stemmer = snowballstemmer.stemmer("english")
        self._stems: dict[str, str] = {}
        self._synsets: dict[str, tuple[int, ...]] = {}
        self._synset_numbers: dict[str, int] = {}  # WordNet's synset ids, numbered as met
        self._hashes: dict[str, int] = {}
        self.function_words = data.function_words

    def stem(self, word: str) -> str:
        found = self._stems.get(word)
        if found is None:
            found = self._stems[word] = self._stemmer.stemWord(word)
        return found

    def hash(self, word: str) -> int:
        """``resources.word_hash``: how the paraphrase index knows the word."""
        found = self._hashes.get(word)
        if found is None:
            found = self._hashes[word] = word_hash(word)
        return found

    def synsets(self, word: str) -> tuple[int, ...]:
        """The word's WordNet synsets (after WordNet's base-form rules), each as a number
        that stays the same for the process."""
        found = self._synsets.get(word)
        if found is None:
            number = self._synset_numbers.setdefault
            found = self._synsets[word] = tuple(
                sorted(number(s, len(self._synset_numbers)) for s in self._lookup_synsets(word))
            )
        return found

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
