"""METEOR 1.5's four matchers, as the jar behaves, compiled.

Matchers (Denkowski & Lavie 2011, 2014), each giving candidate matches
between a candidate's and a reference's tokens:

- exact: equal tokens;
- stem: unequal tokens with equal Snowball (Porter2) stems;
- synonym: unequal tokens sharing a WordNet synset, each token first reduced
  to its base forms by WordNet's exception lists or, failing those, by the
  first detachment rule (``lexicon.MORPHY_RULES``) that yields a known word;
- paraphrase: a phrase pair (up to 7 tokens each side) listed in the table,
  in either direction; a pair listed both ways yields two candidates.

The candidates are ranked by reference start, then module, then, for exact,
stem and synonym matches, candidate start; paraphrases found by looking the
reference's phrases up come before those found from the candidate's, the first
ranked by (reference length, table line, candidate start, candidate length),
the second by (candidate start, candidate length, table line). The alignment
search (capsim.metrics.meteor.alignment) reads them in that order.

Everything in capsim.metrics.meteor's compiled core is compiled by numba (``nogil``:
threads run it side by side), over flat arrays that capsim.metrics.meteor.scorer
prepares once per call (with capsim.metrics.meteor.tables and .lexicon): the sentences
as word ids, each word's stem id, function-word flag and WordNet synsets, each
sentence's phrases of the paraphrase table and each phrase's paraphrases (``Batch``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numba
import numpy as np

EXACT, STEM, SYNONYM, PARAPHRASE = range(4)
MODULE_COUNT = 4

compiled = functools.partial(numba.njit, cache=True, nogil=True)
# Small helpers of the hot loops, inlined where they are called: a call that passes arrays
# counts their references atomically, which costs more than the helper's own work.
inlined = functools.partial(numba.njit, cache=True, nogil=True, inline="always")


class Batch(NamedTuple):
    """One call's captions as arrays (see capsim.metrics.meteor.scorer.Meteor.prepare).

    Sentence s holds ``words[sentence_at[s]:sentence_at[s + 1]]``, and its phrases
    of the paraphrase table are spans ``span_at[s]:span_at[s + 1]``; a word's synsets
    are ``synsets[synset_at[w]:synset_at[w + 1]]``; a phrase's paraphrases
    among the call's phrases are ``reach_target[reach_at[p]:reach_at[p + 1]]``, with
    their table lines. Caption c is sentence ``candidate[c]`` against sentences
    ``reference[reference_at[c]:reference_at[c + 1]]``.
    """

    sentence_at: np.ndarray
    words: np.ndarray
    stems: np.ndarray  # per word id (words are numbered for the process: Lexicon.ids)
    function: np.ndarray  # per word id: a function word
    synset_at: np.ndarray
    synsets: np.ndarray  # numbered for the process
    span_at: np.ndarray
    span_start: np.ndarray
    span_length: np.ndarray
    span_phrase: np.ndarray  # the call's own phrase numbers, 0..phrases - 1
    reach_at: np.ndarray
    reach_target: np.ndarray
    reach_line: np.ndarray
    table_lines: int
    max_words: int
    candidate: np.ndarray
    reference_at: np.ndarray
    reference: np.ndarray


@inlined
def with_room(rows: np.ndarray, used: int) -> np.ndarray:
    """``rows``, doubled when full."""
    if used < rows.shape[0]:
        return rows
    bigger = np.empty((2 * rows.shape[0], rows.shape[1]), rows.dtype)
    bigger[:used] = rows
    return bigger


@inlined
def _put(rows: np.ndarray, n: int, a: int, b: int, c: int, d: int, e: int, f: int, g: int):
    """``rows`` (doubled when full) with row ``n`` set to the seven values."""
    rows = with_room(rows, n)
    rows[n, 0], rows[n, 1], rows[n, 2], rows[n, 3] = a, b, c, d
    rows[n, 4], rows[n, 5], rows[n, 6] = e, f, g
    return rows


@compiled
def _heads(keys: np.ndarray, heads: np.ndarray, after: np.ndarray) -> None:
    """Chains the positions of each key: ``heads[key]`` is the last, ``after[pos]`` the one
    before (-1 ends a chain). ``heads`` must be all -1 for these keys beforehand."""
    for position in range(len(keys)):
        after[position] = heads[keys[position]]
        heads[keys[position]] = position


@compiled
def _clear(keys: np.ndarray, heads: np.ndarray) -> None:
    for key in keys:
        heads[key] = -1


@compiled
def candidates(batch: Batch, test: int, ref: int, scratch: tuple) -> np.ndarray:
    """[matches, 5]: (reference start, candidate start, candidate length, reference length,
    module) of every candidate match of sentences ``test`` and ``ref``, in rank order
    (see the module docstring). ``scratch`` holds all -1 chain heads (see scratch_for)."""
    word_heads, stem_heads, synset_heads, test_phrase_heads, ref_phrase_heads = scratch
    t0, t1 = batch.sentence_at[test], batch.sentence_at[test + 1]
    r0, r1 = batch.sentence_at[ref], batch.sentence_at[ref + 1]
    test_words, ref_words = batch.words[t0:t1], batch.words[r0:r1]
    ref_stems = batch.stems[ref_words]
    counts = batch.synset_at[ref_words + 1] - batch.synset_at[ref_words]
    ref_synsets = np.empty(counts.sum(), np.int64)  # each synset of each reference word
    ref_synset_word = np.empty(len(ref_synsets), np.int64)  # and the word's position
    e = 0
    for j in range(len(ref_words)):
        for k in range(batch.synset_at[ref_words[j]], batch.synset_at[ref_words[j] + 1]):
            ref_synsets[e], ref_synset_word[e] = batch.synsets[k], j
            e += 1
    ts0, ts1 = batch.span_at[test], batch.span_at[test + 1]
    rs0, rs1 = batch.span_at[ref], batch.span_at[ref + 1]
    test_phrases, ref_phrases = batch.span_phrase[ts0:ts1], batch.span_phrase[rs0:rs1]
    after_word = np.empty(len(ref_words), np.int64)
    after_stem = np.empty(len(ref_words), np.int64)
    after_synset = np.empty(len(ref_synsets), np.int64)
    after_test_span = np.empty(len(test_phrases), np.int64)
    after_ref_span = np.empty(len(ref_phrases), np.int64)
    _heads(ref_words, word_heads, after_word)
    _heads(ref_stems, stem_heads, after_stem)
    _heads(ref_synsets, synset_heads, after_synset)
    _heads(test_phrases, test_phrase_heads, after_test_span)
    _heads(ref_phrases, ref_phrase_heads, after_ref_span)
    synonym_of = np.full(len(ref_words), -1, np.int64)  # the candidate word last matched
    # (rank key, rank key within, reference start, candidate start, lengths, module)
    rows = np.empty((max(16, 2 * len(test_words)), 7), np.int64)
    n = 0
    for i in range(len(test_words)):
        word = test_words[i]
        j = word_heads[word]
        while j >= 0:
            rows = _put(rows, n, (j * 4 + EXACT) * 2, i, j, i, 1, 1, EXACT)
            n += 1
            j = after_word[j]
        j = stem_heads[batch.stems[word]]
        while j >= 0:
            if ref_words[j] != word:
                rows = _put(rows, n, (j * 4 + STEM) * 2, i, j, i, 1, 1, STEM)
                n += 1
            j = after_stem[j]
        for k in range(batch.synset_at[word], batch.synset_at[word + 1]):
            e = synset_heads[batch.synsets[k]]
            while e >= 0:  # another word sharing a synset, once however many they share
                j = ref_synset_word[e]
                if ref_words[j] != word and synonym_of[j] != i:
                    synonym_of[j] = i
                    rows = _put(rows, n, (j * 4 + SYNONYM) * 2, i, j, i, 1, 1, SYNONYM)
                    n += 1
                e = after_synset[e]
    lines, lengths, test_len = batch.table_lines, batch.max_words + 1, len(test_words) + 1
    # The reference's phrases looked up, then the candidate's (two candidates where a pair
    # is listed both ways).
    for direction in range(2):
        sources = ref_phrases if direction == 0 else test_phrases
        source_at = rs0 if direction == 0 else ts0
        target_heads = test_phrase_heads if direction == 0 else ref_phrase_heads
        target_after = after_test_span if direction == 0 else after_ref_span
        target_at = ts0 if direction == 0 else rs0
        for a in range(len(sources)):
            phrase = sources[a]
            for k in range(batch.reach_at[phrase], batch.reach_at[phrase + 1]):
                line = batch.reach_line[k]
                b = target_heads[batch.reach_target[k]]
                while b >= 0:
                    start_a = batch.span_start[source_at + a]
                    length_a = batch.span_length[source_at + a]
                    start_b = batch.span_start[target_at + b]
                    length_b = batch.span_length[target_at + b]
                    if direction == 0:
                        j, rl, i, tl = start_a, length_a, start_b, length_b
                        within = ((rl * lines + line) * test_len + i) * lengths + tl
                    else:
                        i, tl, j, rl = start_a, length_a, start_b, length_b
                        within = (i * lengths + tl) * lines + line
                    key = (j * 4 + PARAPHRASE) * 2 + direction
                    rows = _put(rows, n, key, within, j, i, tl, rl, PARAPHRASE)
                    n += 1
                    b = target_after[b]
    _clear(ref_words, word_heads)
    _clear(ref_stems, stem_heads)
    _clear(ref_synsets, synset_heads)
    _clear(test_phrases, test_phrase_heads)
    _clear(ref_phrases, ref_phrase_heads)
    return _ranked_rows(rows, n, (len(ref_words) * 4 + MODULE_COUNT) * 2)


@inlined
def _ranked_rows(rows: np.ndarray, n: int, keys: int) -> np.ndarray:
    """``rows[:n, 2:]`` stably sorted by (rank key, rank key within): counted into their
    rank keys (< ``keys``), then sorted by insertion within each, where the rows of a key
    mostly come in order already."""
    at = np.zeros(keys + 1, np.int64)
    for r in range(n):
        at[rows[r, 0] + 1] += 1
    for key in range(keys):
        at[key + 1] += at[key]
    end = at[:-1].copy()  # the end of each key's rows so far
    order = np.empty(n, np.int64)
    for r in range(n):
        key, within = rows[r, 0], rows[r, 1]
        position = end[key]
        end[key] += 1
        while position > at[key] and rows[order[position - 1], 1] > within:
            order[position] = order[position - 1]
            position -= 1
        order[position] = r
    out = np.empty((n, 5), np.int64)
    for r in range(n):
        out[r] = rows[order[r], 2:]
    return out


@compiled
def scratch_for(batch: Batch) -> tuple:
    """The chain heads ``candidates`` needs, all -1: words, stems, synsets, and phrases
    twice."""
    vocabulary = len(batch.stems)
    stems = batch.stems.max() + 1 if vocabulary else 0
    synsets = batch.synsets.max() + 1 if len(batch.synsets) else 0
    phrases = len(batch.reach_at) - 1
    return (
        np.full(vocabulary, -1, np.int64),
        np.full(stems, -1, np.int64),
        np.full(synsets, -1, np.int64),
        np.full(phrases, -1, np.int64),
        np.full(phrases, -1, np.int64),
    )
