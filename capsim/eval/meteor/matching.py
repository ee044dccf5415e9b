"""METEOR 1.5's four matchers and its alignment search, as the jar behaves, compiled.

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
the second by (candidate start, candidate length, table line).

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

Everything here is compiled by numba (``nogil``: threads run it side by side), over
flat arrays that capsim.eval.meteor.scorer prepares once per call: the sentences as
word ids, each word's stem id, function-word flag and WordNet synsets, each
sentence's phrases of the paraphrase table and each phrase's paraphrases (``Batch``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numba
import numpy as np

from capsim.eval.meteor.resources import BUCKET_SHIFT, FOLD_START, PHRASE, PREFIX, fold

EXACT, STEM, SYNONYM, PARAPHRASE = range(4)
MODULE_COUNT = 4
BEAM_SIZE = 40
STATISTICS = 4 + 4 * MODULE_COUNT + 3  # the jar's sufficient statistics of one alignment
CHUNKS = 4 + 4 * MODULE_COUNT  # where the chunk count sits among them
# METEOR 1.5's English "rank" task (the jar prints them as Parameters/Weights).
ALPHA, BETA, GAMMA, DELTA = 0.85, 0.2, 0.6, 0.75
MODULE_WEIGHTS = np.array([1.0, 0.6, 0.8, 0.6])  # exact, stem, synonym, paraphrase
# A partial's chunks and distance ranked as one integer, as the jar's beam orders them.
CHUNK = np.int64(1 << 32)

compiled = functools.partial(numba.njit, cache=True, nogil=True)
# Small helpers of the hot loops, inlined where they are called: a call that passes arrays
# counts their references atomically, which costs more than the helper's own work.
inlined = functools.partial(numba.njit, cache=True, nogil=True, inline="always")


class Batch(NamedTuple):
    """One call's captions as arrays (see capsim.eval.meteor.scorer.Meteor.prepare).

    Sentence s holds ``words[sentence_at[s]:sentence_at[s + 1]]``, and its phrases
    of the paraphrase table are spans ``span_at[s]:span_at[s + 1]``; a word's synsets
    are ``synsets[synset_at[w]:synset_at[w + 1]]``; a phrase's paraphrases
    among the call's phrases are ``reach_target[reach_at[p]:reach_at[p + 1]]``, with
    their table lines. Caption c is sentence ``candidate[c]`` against sentences
    ``reference[reference_at[c]:reference_at[c + 1]]``.
    """

    sentence_at: np.ndarray
    words: np.ndarray
    stems: np.ndarray  # per word id
    function: np.ndarray  # per word id: a function word
    synset_at: np.ndarray
    synsets: np.ndarray  # numbered for the process (Lexicon.synsets)
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


@compiled
def find_spans(
    sentence_at: np.ndarray,
    words: np.ndarray,
    word_hashes: np.ndarray,
    keys: np.ndarray,
    kinds: np.ndarray,
    buckets: np.ndarray,
    max_words: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each sentence's spans that are phrases of the paraphrase table: (span_at, start,
    length, key), hashing each n-gram from the one a word shorter and stopping where no
    phrase of the table starts with it."""
    count = len(sentence_at) - 1
    span_at = np.zeros(count + 1, np.int64)
    found = np.empty((max(16, 4 * len(words)), 3), np.int64)
    n = 0
    for s in range(count):
        end = sentence_at[s + 1]
        for start in range(sentence_at[s], end):
            state = FOLD_START
            for length in range(1, min(max_words, end - start) + 1):
                state = fold(state, word_hashes[words[start + length - 1]])
                top = state >> BUCKET_SHIFT
                at, high = buckets[top], buckets[top + 1]
                bucket_end = high
                while at < high:  # bisect the keys sharing the top 16 bits
                    middle = (at + high) >> 1
                    if keys[middle] < state:
                        at = middle + 1
                    else:
                        high = middle
                if at == bucket_end or keys[at] != state:
                    break
                if kinds[at] & PHRASE:
                    found = _room(found, n)
                    found[n, 0], found[n, 1], found[n, 2] = start - sentence_at[s], length, at
                    n += 1
                if not kinds[at] & PREFIX:
                    break
        span_at[s + 1] = n
    return span_at, found[:n, 0].copy(), found[:n, 1].copy(), found[:n, 2].copy()


@inlined
def _room(rows: np.ndarray, used: int) -> np.ndarray:
    """``rows``, doubled when full."""
    if used < rows.shape[0]:
        return rows
    bigger = np.empty((2 * rows.shape[0], rows.shape[1]), rows.dtype)
    bigger[:used] = rows
    return bigger


@inlined
def _put(rows: np.ndarray, n: int, a: int, b: int, c: int, d: int, e: int, f: int, g: int):
    """``rows`` (doubled when full) with row ``n`` set to the seven values."""
    rows = _room(rows, n)
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
    rows = rows[:n]
    order = np.argsort(rows[:, 1], kind="mergesort")
    order = order[np.argsort(rows[order, 0], kind="mergesort")]
    return rows[order, 2:]


@inlined
def _before(credit: np.ndarray, rank: np.ndarray, a: int, b: int) -> bool:
    """Partial ``a`` ranks before ``b``: more credit, else a lower chunks-and-distance rank,
    else it came first (the beam's sort is stable)."""
    if credit[a] != credit[b]:
        return credit[a] > credit[b]
    if rank[a] != rank[b]:
        return rank[a] < rank[b]
    return a < b


@inlined
def _push(heap: np.ndarray, size: int, credit: np.ndarray, rank: np.ndarray, new: int) -> int:
    """Offers partial ``new`` (the latest yet) to ``heap``, the best ``len(heap)`` partials
    so far with the worst on top; returns the heap's new size."""
    if size < len(heap):
        at = size
        while at > 0 and _before(credit, rank, heap[(at - 1) // 2], new):
            heap[at] = heap[(at - 1) // 2]
            at = (at - 1) // 2
        heap[at] = new
        return size + 1
    if not _before(credit, rank, new, heap[0]):
        return size
    at = 0
    while True:  # sift the new partial down from the top
        child = 2 * at + 1
        if child >= size:
            break
        if child + 1 < size and _before(credit, rank, heap[child], heap[child + 1]):
            child += 1
        if not _before(credit, rank, new, heap[child]):
            break
        heap[at] = heap[child]
        at = child
    heap[at] = new
    return size


@inlined
def _in_order(heap: np.ndarray, size: int, credit: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The partials of ``heap`` in the beam's order, by insertion from the heap's leaves
    (the better ones) to its top (the worst): nearly in order already."""
    out = heap[:size][::-1].copy()
    for k in range(1, size):
        moving, at = out[k], k
        while at > 0 and _before(credit, rank, moving, out[at - 1]):
            out[at] = out[at - 1]
            at -= 1
        out[at] = moving
    return out


@compiled
def _ranked(credit: np.ndarray, rank: np.ndarray, count: int) -> np.ndarray:
    """The first BEAM_SIZE of ``count`` partials in the beam's order (what a stable sort by
    credit, high first, then rank, low first, and a cut would leave)."""
    heap = np.empty(BEAM_SIZE, np.int64)
    size = 0
    for partial in range(count):
        size = _push(heap, size, credit, rank, partial)
    return _in_order(heap, size, credit, rank)


@inlined
def _credit(candidate: np.ndarray) -> int:
    """What taking a match earns: 2 for an exact match, else candidate words // 2 +
    reference words // 2."""
    if candidate[4] == EXACT:
        return 2
    return candidate[2] // 2 + candidate[3] // 2


@inlined
def _settled(credit: int, rank: int, most: int, least: int) -> bool:
    """A partial of ``credit`` and ``rank`` ranks before every partial grown after it with
    at most ``most`` credit and at least ``least`` rank (a later partial loses a tie)."""
    return credit > most or (credit == most and rank <= least)


@inlined
def _free(mask: np.ndarray, partial: int, start: int, length: int) -> bool:
    """No candidate word start..start + length - 1 is used by the partial."""
    for k in range(start, start + length):
        if mask[partial, k >> 6] >> np.uint64(k & 63) & np.uint64(1):
            return False
    return True


@compiled
def align(test_len: int, ref_len: int, found: np.ndarray) -> np.ndarray:
    """The jar's alignment of one candidate with one reference: the rows of ``found``
    (from ``candidates``) it keeps, in reference order (see the module docstring)."""
    count = found.shape[0]
    test_cover = np.zeros(test_len, np.int64)
    ref_cover = np.zeros(ref_len, np.int64)
    for c in range(count):
        j, i, tl, rl = found[c, 0], found[c, 1], found[c, 2], found[c, 3]
        test_cover[i : i + tl] += 1
        ref_cover[j : j + rl] += 1
    fixed = np.ones(count, np.bool_)
    for c in range(count):
        j, i, tl, rl = found[c, 0], found[c, 1], found[c, 2], found[c, 3]
        for k in range(i, i + tl):
            fixed[c] &= test_cover[k] == 1
        for k in range(j, j + rl):
            fixed[c] &= ref_cover[k] == 1
    if fixed.all():  # nothing to choose: every candidate is taken
        return np.arange(count)
    group = np.searchsorted(found[:, 0], np.arange(ref_len + 1))  # candidates by ref start
    room = BEAM_SIZE * (np.max(group[1:] - group[:-1]) + 1)
    # The beam's partials: credit, chunks-and-distance rank, end of the last match in the
    # reference, end of the open chunk in the candidate (-1: none), last link, candidate
    # words used; a second set of them to build the next beam in.
    beam = _partials(BEAM_SIZE, (test_len + 63) >> 6)
    spare = _partials(BEAM_SIZE, (test_len + 63) >> 6)
    # Grown partials, before the cut keeps BEAM_SIZE of them: the partial they grew from
    # and the candidate they took (-1: none); their words and link are built once kept.
    grown_credit, grown_rank = np.empty(room, np.int64), np.empty(room, np.int64)
    grown_ref_end, grown_open_end = np.empty(room, np.int64), np.empty(room, np.int64)
    grown_from, grown_took = np.empty(room, np.int64), np.empty(room, np.int64)
    heap = np.empty(BEAM_SIZE, np.int64)  # the grown partials the cut keeps, worst on top
    gains = np.array([_credit(found[c]) for c in range(count)], np.int64)
    shifts = np.abs(found[:, 0] - found[:, 1])
    links = np.empty((max(16, 4 * count), 2), np.int64)  # (candidate taken, link before)
    linked = 0
    paths, in_order, all_closed = 1, True, True
    for p in range(ref_len):
        first, last = group[p], group[p + 1]
        if first == last and all_closed:
            continue  # nothing changes at p; the next sort and cut do what these would
        if not in_order:  # chunks closed since the last cut: rank the beam again
            beam, spare = _reordered(beam, spare, paths), beam
            in_order = True
        credit, rank, ref_end, open_end, link, mask = beam
        if first == last:  # each partial goes on, closing its open chunk unless it covers p
            for k in range(paths):
                if ref_end[k] <= p and open_end[k] >= 0:
                    rank[k] += CHUNK
                    open_end[k] = -1
                    in_order = False
            all_closed = ref_cover[p] == 0  # no candidate covers p, so none goes on open
            continue
        all_closed = False
        only = first if last - first == 1 and fixed[first] else -1
        most = 0  # the most credit a match at p earns
        for c in range(first, last):
            most = max(most, gains[c])
        grown = kept = 0
        worst_credit = worst_rank = 0  # the cut's worst partial so far, once it is full
        for k in range(paths):
            if kept == BEAM_SIZE and _settled(worst_credit, worst_rank, credit[k] + most, rank[k]):
                break  # this partial and those after it grow only what the cut drops
            covered = ref_end[k] > p  # a match taken earlier covers p: it goes on unchanged
            lo, hi = (first, first) if covered else (only, only + 1) if only >= 0 else (first, last)
            distance, settled = rank[k], False
            for c in range(lo, hi):
                i, tl = found[c, 1], found[c, 2]
                if not _free(mask, k, i, tl):
                    continue
                opens = open_end[k] >= 0 and open_end[k] != i  # a new chunk starts here
                # A fixed match carries its own distance; a branch leaves it to its parent.
                new_rank = distance + (shifts[c] if only >= 0 else 0) + CHUNK * opens
                new_credit = credit[k] + gains[c]
                if kept < BEAM_SIZE or _settled(new_credit, new_rank, worst_credit, worst_rank - 1):
                    grown_credit[grown], grown_rank[grown] = new_credit, new_rank
                    grown_ref_end[grown] = found[c, 0] + found[c, 3]
                    grown_open_end[grown] = i + tl
                    grown_from[grown], grown_took[grown] = k, c
                    kept = _push(heap, kept, grown_credit, grown_rank, grown)
                    grown += 1
                    if kept == BEAM_SIZE:
                        worst_credit, worst_rank = grown_credit[heap[0]], grown_rank[heap[0]]
                elif _settled(worst_credit, worst_rank, credit[k] + most, distance):
                    settled = True  # its later branches and the partial itself rank lower still
                    break
                distance += shifts[c]
            if not settled and (covered or only < 0):  # the partial taking nothing at p
                new_rank = distance + CHUNK * (not covered and open_end[k] >= 0)
                if kept < BEAM_SIZE or _settled(credit[k], new_rank, worst_credit, worst_rank - 1):
                    grown_credit[grown], grown_rank[grown] = credit[k], new_rank
                    grown_ref_end[grown] = ref_end[k]
                    grown_open_end[grown] = open_end[k] if covered else -1
                    grown_from[grown], grown_took[grown] = k, -1
                    kept = _push(heap, kept, grown_credit, grown_rank, grown)
                    grown += 1
                    if kept == BEAM_SIZE:
                        worst_credit, worst_rank = grown_credit[heap[0]], grown_rank[heap[0]]
        order = _in_order(heap, kept, grown_credit, grown_rank)
        s_credit, s_rank, s_ref_end, s_open_end, s_link, s_mask = spare
        for k in range(len(order)):
            g = order[k]
            parent, c = grown_from[g], grown_took[g]
            s_credit[k], s_rank[k] = grown_credit[g], grown_rank[g]
            s_ref_end[k], s_open_end[k] = grown_ref_end[g], grown_open_end[g]
            for w in range(mask.shape[1]):
                s_mask[k, w] = mask[parent, w]
            s_link[k] = link[parent]
            if c >= 0:
                for w in range(found[c, 1], found[c, 1] + found[c, 2]):
                    s_mask[k, w >> 6] |= np.uint64(1) << np.uint64(w & 63)
                links = _room(links, linked)
                links[linked, 0], links[linked, 1] = c, link[parent]
                s_link[k] = linked
                linked += 1
        beam, spare = spare, beam
        paths = len(order)
    if not in_order:
        beam = _reordered(beam, spare, paths)
    credit, rank, ref_end, open_end, link, mask = beam
    # At p = L every open chunk closes; the final ranking has no further key.
    best = 0
    for k in range(paths):
        closed = rank[k] + CHUNK * (open_end[k] >= 0)
        if credit[k] > credit[best] or (
            credit[k] == credit[best] and closed < rank[best] + CHUNK * (open_end[best] >= 0)
        ):
            best = k
    taken = []
    at = link[best]
    while at >= 0:
        taken.append(links[at, 0])
        at = links[at, 1]
    return np.array(taken[::-1], np.int64)


@compiled
def _partials(size: int, words: int) -> tuple:
    """Room for ``size`` partials (see align), the first one empty."""
    return (
        np.zeros(size, np.int64),
        np.zeros(size, np.int64),
        np.zeros(size, np.int64),
        np.full(size, -1, np.int64),
        np.full(size, -1, np.int64),
        np.zeros((size, words), np.uint64),
    )


@compiled
def _reordered(beam: tuple, spare: tuple, paths: int) -> tuple:
    """``spare`` filled with the beam's partials in the beam's order."""
    order = _ranked(beam[0], beam[1], paths)
    for k in range(len(order)):
        targets, sources = spare[:5], beam[:5]  # the partials' numbers; their words below
        for field in range(5):
            targets[field][k] = sources[field][order[k]]
        spare[5][k] = beam[5][order[k]]
    return spare


@compiled
def statistics(
    batch: Batch, test: int, ref: int, found: np.ndarray, taken: np.ndarray
) -> np.ndarray:
    """The jar's sufficient statistics of one (candidate, reference) alignment.

    Test length, reference length, their function-word counts, then per module
    (test content, reference content, test function, reference function)
    matched words, then chunks, matched test words and matched reference words.
    """
    t0, t1 = batch.sentence_at[test], batch.sentence_at[test + 1]
    r0, r1 = batch.sentence_at[ref], batch.sentence_at[ref + 1]
    test_function = batch.function[batch.words[t0:t1]]
    ref_function = batch.function[batch.words[r0:r1]]
    out = np.zeros(STATISTICS, np.int64)
    out[0], out[1] = t1 - t0, r1 - r0
    out[2], out[3] = test_function.sum(), ref_function.sum()
    for c in taken:
        j, i, tl, rl, module = found[c, 0], found[c, 1], found[c, 2], found[c, 3], found[c, 4]
        tf, rf = test_function[i : i + tl].sum(), ref_function[j : j + rl].sum()
        at = 4 + 4 * module
        out[at] += tl - tf
        out[at + 1] += rl - rf
        out[at + 2] += tf
        out[at + 3] += rf
        out[CHUNKS + 1] += tl
        out[CHUNKS + 2] += rl
    # Chunks: runs of matches contiguous and in the same order in both sentences.
    by_test = taken[np.argsort(found[taken, 1])]
    test_end = ref_end = -1
    for c in by_test:
        if found[c, 1] != test_end or found[c, 0] != ref_end:
            out[CHUNKS] += 1
        test_end, ref_end = found[c, 1] + found[c, 2], found[c, 0] + found[c, 3]
    return out


@compiled
def unfragmented(stats: np.ndarray) -> bool:
    """Both sentences matched word for word in one chunk: no fragmentation penalty."""
    return stats[CHUNKS + 1] == stats[0] and stats[CHUNKS + 2] == stats[1] and stats[CHUNKS] == 1


@compiled
def score(stats: np.ndarray) -> float:
    """METEOR from the 23 statistics (one caption's or a corpus sum), in the jar's own
    floating-point operations and order, so that a tie between references breaks as it
    breaks there: the weighted content matches summed over the modules, then the
    weighted function-word matches; Fmean as 1 / ((1 - alpha) / P + alpha / R). Equal
    bit for bit to the jar's EVAL on 6,000 random statistics (bench/RESULTS.md, "METEOR's
    arithmetic"), since its Math.pow and this pow agree on all but a few fragmentations."""
    test_len, ref_len, test_func, ref_func = stats[0], stats[1], stats[2], stats[3]
    test_num = ref_num = 0.0
    for module in range(MODULE_COUNT):
        weight, at = MODULE_WEIGHTS[module], 4 + 4 * module
        test_num += DELTA * (weight * stats[at])
        ref_num += DELTA * (weight * stats[at + 1])
    for module in range(MODULE_COUNT):
        weight, at = MODULE_WEIGHTS[module], 4 + 4 * module
        test_num += (1 - DELTA) * (weight * stats[at + 2])
        ref_num += (1 - DELTA) * (weight * stats[at + 3])
    test_den = DELTA * (test_len - test_func) + (1 - DELTA) * test_func
    ref_den = DELTA * (ref_len - ref_func) + (1 - DELTA) * ref_func
    precision = test_num / test_den if test_den > 0 else 0.0
    recall = ref_num / ref_den if ref_den > 0 else 0.0
    if precision <= 0 or recall <= 0:
        return 0.0
    fmean = 1.0 / ((1 - ALPHA) / precision + ALPHA / recall)
    matched = (stats[CHUNKS + 1] + stats[CHUNKS + 2]) / 2.0
    fragmentation = 0.0 if unfragmented(stats) else stats[CHUNKS] / matched
    return max(0.0, fmean * (1 - GAMMA * fragmentation**BETA))


@compiled
def scores(rows: np.ndarray) -> np.ndarray:
    """``score`` of each row of statistics."""
    return np.array([score(rows[k]) for k in range(rows.shape[0])], np.float64)


@compiled
def unfragmented_rows(rows: np.ndarray) -> np.ndarray:
    """``unfragmented`` of each row of statistics."""
    return np.array([unfragmented(rows[k]) for k in range(rows.shape[0])], np.bool_)


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


@compiled
def caption_statistics(batch: Batch, first: int, last: int) -> np.ndarray:
    """[captions, 23]: for captions first..last - 1, the statistics of the reference that
    scores highest (the first one on an exact tie of the jar's arithmetic)."""
    scratch = scratch_for(batch)
    out = np.zeros((last - first, STATISTICS), np.int64)
    for c in range(first, last):
        test = batch.candidate[c]
        test_len = batch.sentence_at[test + 1] - batch.sentence_at[test]
        best_score = -1.0
        for k in range(batch.reference_at[c], batch.reference_at[c + 1]):
            ref = batch.reference[k]
            found = candidates(batch, test, ref, scratch)
            ref_len = batch.sentence_at[ref + 1] - batch.sentence_at[ref]
            stats = statistics(batch, test, ref, found, align(test_len, ref_len, found))
            value = score(stats)
            if value > best_score:
                best_score = value
                out[c - first] = stats
    return out
