"""METEOR 1.5's four matchers and its alignment search, as the jar behaves.

Matchers (Denkowski & Lavie 2011, 2014), each giving candidate matches
between a candidate's and a reference's tokens:

- exact: equal tokens;
- stem: unequal tokens with equal Snowball (Porter2) stems;
- synonym: unequal tokens sharing a WordNet synset, each token first reduced
  to its base forms by WordNet's exception lists or, failing those, by the
  first detachment rule (``lexicon.MORPHY_RULES``) that yields a known word;
- paraphrase: a phrase pair (up to 7 tokens each side) listed in the table,
  in either direction; a pair listed both ways yields two candidates.

The alignment is the jar's beam search over the reference, left to right. A
partial alignment carries its credit, chunks, distance, the words it uses and
whether a chunk is open (and where it ends in the candidate). A candidate match
is fixed when it is the only one starting at its reference word and no other
match covers any of its words. At every reference position p = 0..L (L the
reference length, positions without matches included) the partials are stably
sorted by credit (high first), chunks (few first) and distance (small first),
and the first BEAM_SIZE are kept. Then each, in that order:

- at p = L an open chunk closes (chunks + 1);
- a partial whose taken match covers p goes on unchanged, and a fixed match at
  p is taken;
- otherwise each match starting at p that uses no taken word makes a branch, a
  copy of the partial as it is now: credit + 2 for an exact match, else
  candidate words // 2 + reference words // 2 (so a one-to-one stem, synonym
  or paraphrase match earns nothing); chunks + 1 if an open chunk does not end
  where the match starts in the candidate; the match's end opens the chunk.
  After each branch the *parent's* distance (not the branch's) grows by
  |reference start - candidate start|. The parent then goes on after its
  branches as the path that skips p, closing an open chunk.

After p = L one more sort ranks the partials the same way and the first wins.
Chunks are counted when they close, which shapes the rankings on the way.
Written from that description (the jar's Java is LGPL), it gives every
Flickr8k-Expert and COCO caption of bench/meteor_agreement.py the jar's score.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from capsim.eval.meteor.lexicon import Lexicon

EXACT, STEM, SYNONYM, PARAPHRASE = range(4)
MODULE_COUNT = 4
BEAM_SIZE = 40


class Match(NamedTuple):
    """Tokens [test, test + test_len) of the candidate match [ref, ref + ref_len)."""

    test: int
    test_len: int
    ref: int
    ref_len: int
    module: int


# A candidate as the search reads it: (reference start, rank among the candidates
# starting there, test start, test length, reference length, module).
Candidate = tuple[int, tuple, int, int, int, int]


@dataclasses.dataclass(frozen=True)
class Sentence:
    """A normalized sentence with what the matchers need of it, computed once."""

    words: list[str]
    stems: list[str]
    synonyms: list[frozenset[str]]  # the other words of the call sharing a synset with each
    all_synonyms: frozenset[str]  # and all of them
    phrases: dict[int, list[tuple[int, int]]]
    paraphrased: frozenset[int]  # the phrase ids that its phrases paraphrase
    at_word: dict[str, list[int]]  # positions of each word and of each stem
    at_stem: dict[str, list[int]]
    function: list[bool]  # which words are function words
    shares: list[float]  # each word's weight in precision and recall, and their sum
    total_share: float

    @classmethod
    def of(
        cls,
        words: list[str],
        lexicon: Lexicon,
        phrases: dict[int, list[tuple[int, int]]],
        reach: dict[int, dict[int, int]],
        synonyms: dict[str, frozenset[str]],
        function_share: float,
    ) -> Sentence:
        """``reach`` maps each phrase id to its paraphrases (see Phrases.within);
        ``synonyms`` maps each word to the other words it may be matched with as a synonym
        (see ``synonym_words``); a function word weighs ``function_share`` in precision and
        recall, a content word 1 - ``function_share``."""
        stems = [lexicon.stem(w) for w in words]
        at_word: dict[str, list[int]] = {}
        at_stem: dict[str, list[int]] = {}
        for position, (word, stem) in enumerate(zip(words, stems, strict=True)):
            at_word.setdefault(word, []).append(position)
            at_stem.setdefault(stem, []).append(position)
        function = [w in lexicon.function_words for w in words]
        shares = [function_share if f else 1 - function_share for f in function]
        near = [synonyms[w] for w in words]
        return cls(
            words=words,
            stems=stems,
            synonyms=near,
            all_synonyms=frozenset().union(*near),
            phrases=phrases,
            paraphrased=frozenset().union(*(reach[p] for p in phrases)),
            at_word=at_word,
            at_stem=at_stem,
            function=function,
            shares=shares,
            total_share=sum(shares),
        )


def synonym_words(vocabulary: Iterable[str], lexicon: Lexicon) -> dict[str, frozenset[str]]:
    """Each word -> the other words of ``vocabulary`` that share a WordNet synset with it,
    from one inverted index over the words of a call (cheaper than intersecting the
    synsets of every pair of words in every pair of sentences)."""
    synsets = {word: lexicon.synsets(word) for word in vocabulary}
    members: dict[str, set[str]] = {}
    for word, found in synsets.items():
        for synset in found:
            members.setdefault(synset, set()).add(word)
    return {
        word: frozenset().union(*(members[s] for s in found)) - {word} if found else frozenset()
        for word, found in synsets.items()
    }


def candidates(test: Sentence, ref: Sentence, reach: dict[int, dict[int, int]]) -> list[Candidate]:
    """Every candidate match, with its rank among those starting at its reference token
    (in no particular order: align sorts them).

    ``reach`` maps each phrase id of both sentences to its paraphrases (see Phrases.within).
    """
    found = []
    test_words, ref_words, ref_at_word = test.words, ref.words, ref.at_word
    for word in test.at_word.keys() & ref_at_word.keys():
        for i in test.at_word[word]:
            for j in ref_at_word[word]:
                found.append((j, (EXACT, i), i, 1, 1, EXACT))
    for stem in test.at_stem.keys() & ref.at_stem.keys():
        for i in test.at_stem[stem]:
            for j in ref.at_stem[stem]:
                if ref_words[j] != test_words[i]:
                    found.append((j, (STEM, i), i, 1, 1, STEM))
    if not test.all_synonyms.isdisjoint(ref_at_word):
        for i, near in enumerate(test.synonyms):
            for other in near.intersection(ref_at_word) if near else ():
                for j in ref_at_word[other]:
                    found.append((j, (SYNONYM, i), i, 1, 1, SYNONYM))
    for (rs, rl), (ts, tl), line in _paraphrase_pairs(ref, test, reach):
        found.append((rs, (PARAPHRASE, 0, rl, line, ts, tl), ts, tl, rl, PARAPHRASE))
    for (ts, tl), (rs, rl), line in _paraphrase_pairs(test, ref, reach):
        found.append((rs, (PARAPHRASE, 1, ts, tl, line), ts, tl, rl, PARAPHRASE))
    return found


def _paraphrase_pairs(
    source: Sentence, target: Sentence, reach: dict[int, dict[int, int]]
) -> Iterator[tuple[tuple[int, int], tuple[int, int], int]]:
    """(source span, target span, table line) of each pair found by looking ``source``'s
    phrases up in the table; each direction's candidates rank differently."""
    if source.paraphrased.isdisjoint(target.phrases):
        return  # most pairs of sentences: no phrase of one paraphrases one of the other
    target_ids = target.phrases.keys()
    for source_id, source_spans in source.phrases.items():
        listed = reach[source_id]
        for target_id in listed.keys() & target_ids if listed else ():
            line = listed[target_id]
            for source_span in source_spans:
                for target_span in target.phrases[target_id]:
                    yield source_span, target_span, line


def align(test_len: int, ref_len: int, found: list[Candidate]) -> list[Match]:
    """The jar's alignment of one candidate with one reference (see the module docstring)."""
    found.sort()
    test_cover = [0] * test_len
    ref_cover = [0] * ref_len
    for j, _, i, tl, rl, _ in found:
        for k in range(i, i + tl):
            test_cover[k] += 1
        for k in range(j, j + rl):
            ref_cover[k] += 1
    unique = [
        test_cover[i] == 1 and ref_cover[j] == 1
        if tl == rl == 1  # most candidates: one word each side
        else all(c == 1 for c in test_cover[i : i + tl])
        and all(c == 1 for c in ref_cover[j : j + rl])
        for j, _, i, tl, rl, _ in found
    ]
    if all(unique):  # nothing to choose: every candidate is fixed
        return [Match(i, tl, j, rl, module) for j, _, i, tl, rl, module in found]
    # Per reference start: (candidate, test mask, ref mask, credit as rank, test start,
    # test end, distance, fixed).
    options: dict[int, list[tuple]] = {}
    for candidate, is_unique in zip(found, unique, strict=True):
        j, _, i, tl, rl, module = candidate
        credit = 2 if module == EXACT else tl // 2 + rl // 2
        options.setdefault(j, []).append(
            (candidate, ((1 << tl) - 1) << i, ((1 << rl) - 1) << j, credit * CREDIT, i, i + tl,
             abs(j - i), is_unique)
        )  # fmt: skip
    # A partial alignment: (rank, test mask, ref mask, end of its open chunk in the test
    # or -1, (last match, the partial's earlier link)).
    paths: list[tuple] = [(0, 0, 0, -1, None)]
    all_closed = True  # no partial has an open chunk
    for p in range(ref_len):
        here = options.get(p, ())
        if not here and all_closed:
            continue  # nothing changes at p; the next sort and cut do what these would
        if len(paths) > 1:
            paths.sort(key=_rank)
            del paths[BEAM_SIZE:]
        bit = 1 << p
        if not here:  # each partial goes on, closing its open chunk unless it covers p
            paths = [
                path if path[2] & bit or path[3] < 0 else (path[0] + CHUNK, *path[1:3], -1, path[4])
                for path in paths
            ]
            all_closed = not ref_cover[p]  # no candidate covers p, so none goes on open
            continue
        all_closed = False
        fixed = here[0] if len(here) == 1 and here[0][7] else None
        grown = []
        for path in paths:
            rank, tmask, rmask, open_end, link = path
            if rmask & bit:
                grown.append(path)
            elif fixed is not None:
                candidate, tm, rm, gain, start, end, shift, _ = fixed
                grown.append(
                    (rank - gain + CHUNK * (0 <= open_end != start) + shift, tmask | tm,
                     rmask | rm, end, (candidate, link))
                )  # fmt: skip
            else:
                for candidate, tm, rm, gain, start, end, shift, _ in here:
                    if tmask & tm or rmask & rm:
                        continue
                    grown.append(
                        (rank - gain + CHUNK * (0 <= open_end != start), tmask | tm,
                         rmask | rm, end, (candidate, link))
                    )  # fmt: skip
                    rank += shift
                grown.append((rank + CHUNK * (open_end >= 0), tmask, rmask, -1, link))
        paths = grown
    paths.sort(key=_rank)
    del paths[BEAM_SIZE:]
    # At p = L every open chunk closes; the final ranking has no further key.
    link = min(paths, key=lambda path: path[0] + CHUNK * (path[3] >= 0))[4]
    matches = []
    while link is not None:
        (j, _, i, tl, rl, module), link = link
        matches.append(Match(i, tl, j, rl, module))
    return matches[::-1]


def longest_chunk(found: Sequence[Candidate]) -> float:
    """The most matched words (the mean of both sides) that one chunk of any alignment
    built from ``found`` can hold: the heaviest chain of candidates each starting where
    the one before ends, in both sentences."""
    heaviest: dict[tuple[int, int], float] = {}  # from each (test, reference) start
    for j, _, i, tl, rl, _ in sorted(found, key=_test_start, reverse=True):
        size = (tl + rl) / 2 + heaviest.get((i + tl, j + rl), 0.0)
        if size > heaviest.get((i, j), 0.0):
            heaviest[i, j] = size
    return max(heaviest.values(), default=0.0)


_test_start = operator.itemgetter(2)


# A partial's rank is one integer ordered as (-credit, chunks, distance), cheaper to sort
# by than a tuple: chunks and distance stay far below CHUNK (2**32).
CHUNK = 1 << 32
CREDIT = CHUNK * CHUNK
_rank = operator.itemgetter(0)


def chunk_count(matches: Sequence[Match]) -> int:
    """Runs of matches contiguous and in the same order in both sentences."""
    count, previous = 0, None
    for m in sorted(matches, key=lambda m: m.test):
        if previous is None or (m.test, m.ref) != (
            previous.test + previous.test_len,
            previous.ref + previous.ref_len,
        ):
            count += 1
        previous = m
    return count


def statistics(test: Sentence, ref: Sentence, matches: Sequence[Match]) -> tuple[int, ...]:
    """The jar's sufficient statistics of one (candidate, reference) alignment.

    Test length, reference length, their function-word counts, then per module
    (test content, reference content, test function, reference function)
    matched words, then chunks, matched test words and matched reference words.
    """
    per_module = [0] * (4 * MODULE_COUNT)
    test_matched = ref_matched = 0
    for m in matches:
        test_function = sum(test.function[m.test : m.test + m.test_len])
        ref_function = sum(ref.function[m.ref : m.ref + m.ref_len])
        at = 4 * m.module
        per_module[at] += m.test_len - test_function
        per_module[at + 1] += m.ref_len - ref_function
        per_module[at + 2] += test_function
        per_module[at + 3] += ref_function
        test_matched += m.test_len
        ref_matched += m.ref_len
    return (
        len(test.words),
        len(ref.words),
        sum(test.function),
        sum(ref.function),
        *per_module,
        chunk_count(matches),
        test_matched,
        ref_matched,
    )
