"""METEOR 1.5's alignment search, as the jar behaves, compiled.

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
Flickr8k-Expert and COCO caption of bench/agreement/meteor_agreement.py the jar's score.
"""

from __future__ import annotations

import numpy as np

from capsim.metrics.meteor.matching import EXACT, compiled, inlined, with_room

BEAM_SIZE = 40
# A partial's chunks and distance ranked as one integer, as the jar's beam orders them.
CHUNK = np.int64(1 << 32)


@inlined
def _ahead(credit: int, rank: int, cut_credit: np.ndarray, cut_rank: np.ndarray, at: int) -> bool:
    """A partial of ``credit`` and ``rank``, newer than the cut's partial ``at``, ranks before
    it: more credit, else a lower chunks-and-distance rank (a tie keeps the older first, as
    the beam's sort is stable). Bitwise operators, not ``or`` and ``and``: the outcome is
    hard to predict, and compiled without branches the search is about a third faster."""
    return (credit > cut_credit[at]) | ((credit == cut_credit[at]) & (rank < cut_rank[at]))


@inlined
def _offer(
    cut_credit: np.ndarray,
    cut_rank: np.ndarray,
    cut_id: np.ndarray,
    size: int,
    credit: int,
    rank: int,
    new: int,
) -> int:
    """Offers partial ``new``, the latest yet, to the cut: the best ``size`` (at most
    BEAM_SIZE) partials so far in the beam's order, with their credit and rank beside them
    so that an insertion reads no other array. Returns how many the cut holds."""
    if size == BEAM_SIZE:
        if not _ahead(credit, rank, cut_credit, cut_rank, size - 1):
            return size
        at = size - 1  # the worst makes room
    else:
        at = size
        size += 1
    while at > 0 and _ahead(credit, rank, cut_credit, cut_rank, at - 1):
        cut_credit[at] = cut_credit[at - 1]
        cut_rank[at] = cut_rank[at - 1]
        cut_id[at] = cut_id[at - 1]
        at -= 1
    cut_credit[at], cut_rank[at], cut_id[at] = credit, rank, new
    return size


@compiled
def _ranked(credit: np.ndarray, rank: np.ndarray, count: int) -> np.ndarray:
    """The first BEAM_SIZE of ``count`` partials in the beam's order (what a stable sort by
    credit, high first, then rank, low first, and a cut would leave)."""
    cut_credit, cut_rank = np.empty(BEAM_SIZE, np.int64), np.empty(BEAM_SIZE, np.int64)
    cut_id = np.empty(BEAM_SIZE, np.int64)
    size = 0
    for partial in range(count):
        size = _offer(cut_credit, cut_rank, cut_id, size, credit[partial], rank[partial], partial)
    return cut_id[:size]


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
    return (credit > most) | ((credit == most) & (rank <= least))  # no branches, as _ahead


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
    grown_ref_end, grown_open_end = np.empty(room, np.int64), np.empty(room, np.int64)
    grown_from, grown_took = np.empty(room, np.int64), np.empty(room, np.int64)
    # The grown partials the cut keeps, in the beam's order: credit, rank, grown number.
    cut_credit, cut_rank = np.empty(BEAM_SIZE, np.int64), np.empty(BEAM_SIZE, np.int64)
    cut_id = np.empty(BEAM_SIZE, np.int64)
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
                # Kept while the cut has room, or if it ranks before the cut's worst.
                if kept < BEAM_SIZE or _settled(new_credit, new_rank, worst_credit, worst_rank - 1):
                    grown_ref_end[grown] = found[c, 0] + found[c, 3]
                    grown_open_end[grown] = i + tl
                    grown_from[grown], grown_took[grown] = k, c
                    kept = _offer(cut_credit, cut_rank, cut_id, kept, new_credit, new_rank, grown)
                    grown += 1
                    if kept == BEAM_SIZE:
                        worst_credit, worst_rank = cut_credit[kept - 1], cut_rank[kept - 1]
                elif _settled(worst_credit, worst_rank, credit[k] + most, distance):
                    settled = True  # its later branches and the partial itself rank lower still
                    break
                distance += shifts[c]
            if not settled and (covered or only < 0):  # the partial taking nothing at p
                new_rank = distance + CHUNK * (not covered and open_end[k] >= 0)
                if kept < BEAM_SIZE or _settled(credit[k], new_rank, worst_credit, worst_rank - 1):
                    grown_ref_end[grown] = ref_end[k]
                    grown_open_end[grown] = open_end[k] if covered else -1
                    grown_from[grown], grown_took[grown] = k, -1
                    kept = _offer(cut_credit, cut_rank, cut_id, kept, credit[k], new_rank, grown)
                    grown += 1
                    if kept == BEAM_SIZE:
                        worst_credit, worst_rank = cut_credit[kept - 1], cut_rank[kept - 1]
        s_credit, s_rank, s_ref_end, s_open_end, s_link, s_mask = spare
        for k in range(kept):
            g = cut_id[k]
            parent, c = grown_from[g], grown_took[g]
            s_credit[k], s_rank[k] = cut_credit[k], cut_rank[k]
            s_ref_end[k], s_open_end[k] = grown_ref_end[g], grown_open_end[g]
            for w in range(mask.shape[1]):
                s_mask[k, w] = mask[parent, w]
            s_link[k] = link[parent]
            if c >= 0:
                for w in range(found[c, 1], found[c, 1] + found[c, 2]):
                    s_mask[k, w >> 6] |= np.uint64(1) << np.uint64(w & 63)
                links = with_room(links, linked)
                links[linked, 0], links[linked, 1] = c, link[parent]
                s_link[k] = linked
                linked += 1
        beam, spare = spare, beam
        paths = kept
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
