"""What METEOR's matchers look up about words and phrases, memoised for the process:
Snowball stems and WordNet synsets of words (Lexicon), and which spans of sentences are
phrases of the paraphrase table, with their paraphrases (Phrases)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import snowballstemmer

from capsim.eval.meteor.resources import JarData, ParaphraseIndex, phrase_hashes

MEMO_SIZE = 1 << 21  # n-grams whose phrase id is remembered
# WordNet's detachment rules (nouns, verbs, adjectives), tried in this order.
MORPHY_RULES = (
    ("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
    ("men", "man"), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
    ("ing", "e"), ("ing", ""), ("er", ""), ("est", ""), ("er", "e"), ("est", "e"),
)  # fmt: skip
# WordNet leaves short words and nouns in -ss alone ("as", "glass", "discuss").
MORPHY_MIN_LENGTH = 3


class Lexicon:
    """Stems and WordNet synsets of words, memoised for the process."""

    def __init__(self, data: JarData):
        self._data = data
        self._stemmer = snowballstemmer.stemmer("english")
        self._stems: dict[str, str] = {}
        self._synsets: dict[str, frozenset[str]] = {}
        self.function_words = data.function_words

    def stem(self, word: str) -> str:
        found = self._stems.get(word)
        if found is None:
            found = self._stems[word] = self._stemmer.stemWord(word)
        return found

    def synsets(self, word: str) -> frozenset[str]:
        found = self._synsets.get(word)
        if found is None:
            found = self._synsets[word] = self._lookup_synsets(word)
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


class Phrases:
    """Which spans of sentences are phrases of the paraphrase table, and their paraphrases."""

    def __init__(self, index: ParaphraseIndex):
        self._index = index
        self._ids: dict[str, int] = {}

    def spans(self, sentences: Sequence[Sequence[str]]) -> list[dict[int, list[tuple[int, int]]]]:
        """For each sentence: phrase id -> (start, length) of its spans that the table lists.

        N-grams not seen before are hashed and looked up in one vectorised search;
        the answers are memoised for the process (up to MEMO_SIZE n-grams).
        """
        unseen: set[str] = set()
        found = [self._listed(words, unseen) for words in sentences]
        if unseen:
            memo = self._ids
            if len(memo) + len(unseen) > MEMO_SIZE:
                memo.clear()
            new = list(unseen)
            memo.update(zip(new, self._index.ids(phrase_hashes(new)).tolist(), strict=True))
            found = [
                listed if listed is not None else self._listed(words, unseen)
                for words, listed in zip(sentences, found, strict=True)
            ]
        return found

    def _listed(
        self, words: Sequence[str], unseen: set[str]
    ) -> dict[int, list[tuple[int, int]]] | None:
        """``spans`` of one sentence, or None after adding its n-grams not in the memo to
        ``unseen``."""
        get, limit = self._ids.get, self._index.max_words
        listed: dict[int, list[tuple[int, int]]] = {}
        complete = True
        for start in range(len(words)):
            text = ""
            for length, word in enumerate(words[start : start + limit], 1):
                text = f"{text} {word}" if text else word
                phrase = get(text)
                if phrase is None:
                    unseen.add(text)
                    complete = False
                elif phrase >= 0:
                    listed.setdefault(phrase, []).append((start, length))
        return listed if complete else None

    def within(
        self, sentences: list[dict[int, list[tuple[int, int]]]]
    ) -> dict[int, dict[int, int]]:
        """Each phrase of ``sentences`` -> its paraphrases among them -> their table line.

        One vectorised pass over the table for all the sentences of a call, so
        that matching two sentences only intersects these small sets.
        """
        present = {phrase for spans in sentences for phrase in spans}
        reach: dict[int, dict[int, int]] = {phrase: {} for phrase in present}
        if present:
            sources, targets, lines = self._index.links(np.fromiter(present, np.int64))
            for source, target, line in zip(
                sources.tolist(), targets.tolist(), lines.tolist(), strict=True
            ):
                reach[source][target] = line
        return reach
