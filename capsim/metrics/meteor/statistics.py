"""METEOR 1.5's sufficient statistics and score, and a call's captions scored: for each,
the statistics of its best reference (capsim.metrics.meteor.matching finds the candidate
matches, capsim.metrics.meteor.alignment aligns them), compiled."""

from __future__ import annotations

import numpy as np

from capsim.metrics.meteor.alignment import align
from capsim.metrics.meteor.matching import MODULE_COUNT, Batch, candidates, compiled, scratch_for

STATISTICS = 4 + 4 * MODULE_COUNT + 3  # the jar's sufficient statistics of one alignment
CHUNKS = 4 + 4 * MODULE_COUNT  # where the chunk count sits among them
# METEOR 1.5's English "rank" task (the jar prints them as Parameters/Weights).
ALPHA, BETA, GAMMA, DELTA = 0.85, 0.2, 0.6, 0.75
MODULE_WEIGHTS = np.array([1.0, 0.6, 0.8, 0.6])  # exact, stem, synonym, paraphrase


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
