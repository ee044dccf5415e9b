"""A call's captions turned into the compiled core's tables, in compiled code: the words
numbered, and each sentence's phrases of the paraphrase table found, numbered and linked
to their paraphrases among the call's phrases (capsim.metrics.meteor.scorer builds the
``matching.Batch`` from them)."""

from __future__ import annotations

import numpy as np

from capsim.metrics.meteor.matching import compiled, inlined, with_room
from capsim.metrics.meteor.resources import (
    BUCKET_SHIFT,
    FOLD_START,
    PHRASE,
    PREFIX,
    IndexArrays,
    fold,
)
from capsim.metrics.ngram_counts import open_slot

SPACE = 32  # the byte between words
_FNV_START, _FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


@inlined
def _same_bytes(text: np.ndarray, a: int, b: int, length: int) -> bool:
    k = 0
    while k < length and text[a + k] == text[b + k]:
        k += 1
    return k == length


@compiled
def number_words(text: np.ndarray, ends: np.ndarray) -> tuple:
    """The words of sentences ``text[ends[s - 1]:ends[s]]`` (UTF-8 bytes; words are runs of
    bytes other than a space), numbered in the order they are first met: (sentence_at,
    word ids, [distinct words, 2] byte start and end of each word's first appearance)."""
    ids = np.empty(len(text) // 2 + len(ends) + 1, np.int64)
    sentence_at = np.zeros(len(ends) + 1, np.int64)
    firsts = np.empty((64, 2), np.int64)
    hashes = np.empty(64, np.uint64)
    bits = 8
    slots = np.full(1 << bits, -1, np.int64)
    n = distinct = start = 0
    for s in range(len(ends)):
        k, end = start, ends[s]
        while k < end:
            if text[k] == SPACE:
                k += 1
                continue
            word_start, state = k, _FNV_START
            while k < end and text[k] != SPACE:
                state = (state ^ np.uint64(text[k])) * _FNV_PRIME
                k += 1
            length = k - word_start
            mask = np.int64((1 << bits) - 1)
            at = np.int64(state >> np.uint64(64 - bits))
            while slots[at] >= 0:
                word = slots[at]
                if (
                    hashes[word] == state
                    and firsts[word, 1] - firsts[word, 0] == length
                    and _same_bytes(text, firsts[word, 0], word_start, length)
                ):
                    break
                at = (at + np.int64(1)) & mask
            else:  # a new word
                word = distinct
                firsts = with_room(firsts, word)
                if word == len(hashes):
                    hashes = np.concatenate((hashes, np.empty(word, np.uint64)))
                firsts[word, 0], firsts[word, 1], hashes[word] = word_start, k, state
                slots[at] = word
                distinct += 1
                if 2 * distinct > len(slots):  # half full: twice the slots, rehashed
                    bits += 1
                    slots = np.full(1 << bits, -1, np.int64)
                    for w in range(distinct):
                        at = np.int64(hashes[w] >> np.uint64(64 - bits))
                        while slots[at] >= 0:
                            at = (at + np.int64(1)) & np.int64((1 << bits) - 1)
                        slots[at] = w
            ids[n] = word
            n += 1
        sentence_at[s + 1] = n
        start = end
    return sentence_at, ids[:n].copy(), firsts[:distinct].copy()


@inlined
def _key_at(keys: np.ndarray, buckets: np.ndarray, state: np.uint64) -> int:
    """Where ``state`` is among the index's keys, or -1: a bisection of the keys that share
    its top bits."""
    top = state >> BUCKET_SHIFT
    at, high = buckets[top], buckets[top + 1]
    bucket_end = high
    while at < high:
        middle = (at + high) >> 1
        if keys[middle] < state:
            at = middle + 1
        else:
            high = middle
    if at == bucket_end or keys[at] != state:
        return -1
    return at


@compiled
def _find_spans(
    sentence_at: np.ndarray, words: np.ndarray, word_hashes: np.ndarray, index: IndexArrays
) -> tuple:
    """Each sentence's spans that are phrases of the paraphrase table: (span_at, [spans, 3]
    start in the sentence, length and key position), hashing each n-gram from the one a
    word shorter and stopping where no phrase of the table starts with it. A word's own
    key is looked up once per call."""
    keys, kinds, buckets, max_words = index.keys, index.kinds, index.buckets, index.max_words
    count = len(sentence_at) - 1
    span_at = np.zeros(count + 1, np.int64)
    found = np.empty((max(16, 4 * len(words)), 3), np.int64)
    word_key = np.full(len(word_hashes), -2, np.int64)  # -2: not looked up yet
    n = 0
    for s in range(count):
        end = sentence_at[s + 1]
        for start in range(sentence_at[s], end):
            state = FOLD_START
            for length in range(1, min(max_words, end - start) + 1):
                word = words[start + length - 1]
                state = fold(state, word_hashes[word])
                if length > 1:
                    at = _key_at(keys, buckets, state)
                else:
                    if word_key[word] == -2:
                        word_key[word] = _key_at(keys, buckets, state)
                    at = word_key[word]
                if at < 0:
                    break
                if kinds[at] & PHRASE:
                    found = with_room(found, n)
                    found[n, 0], found[n, 1], found[n, 2] = start - sentence_at[s], length, at
                    n += 1
                if not kinds[at] & PREFIX:
                    break
        span_at[s + 1] = n
    return span_at, found[:n]


@compiled
def phrase_tables(
    sentence_at: np.ndarray, words: np.ndarray, word_hashes: np.ndarray, index: IndexArrays
) -> tuple:
    """The sentences' phrases of the paraphrase table and their links: (span_at,
    span_start, span_length, span_phrase, reach_at, reach_target, reach_line), see
    ``matching.Batch``. The call's phrases are numbered in the order of their keys, and a
    phrase's paraphrases among them are listed in the index's order (ascending keys)."""
    span_at, spans = _find_spans(sentence_at, words, word_hashes, index)
    # Each distinct key numbered as met (an open-addressing table), then by key order.
    bits = 8
    slots = np.full(1 << bits, -1, np.int64)
    met = np.empty(len(spans), np.int64)  # the key of each phrase as met
    distinct = 0
    for k in range(len(spans)):
        if 2 * (distinct + 1) > len(slots):
            bits += 1
            slots = np.full(1 << bits, -1, np.int64)
            for m in range(distinct):
                slots[open_slot(slots, met[m], bits)] = met[m]
        at = open_slot(slots, spans[k, 2], bits)
        if slots[at] == -1:
            slots[at] = met[distinct] = spans[k, 2]
            distinct += 1
    present = np.sort(met[:distinct])
    # The slots now map a key to its rank among the present keys.
    number_of_slot = np.full(len(slots), -1, np.int64)
    for p in range(distinct):
        number_of_slot[open_slot(slots, present[p], bits)] = p
    span_phrase = np.empty(len(spans), np.int64)
    for k in range(len(spans)):
        span_phrase[k] = number_of_slot[open_slot(slots, spans[k, 2], bits)]
    # Each present phrase's paraphrases that are present too.
    reach_at = np.zeros(distinct + 1, np.int64)
    reach_target = np.empty(16, np.int64)
    reach_line = np.empty(16, np.int64)
    n = 0
    for p in range(distinct):
        for k in range(index.paraphrase_at[present[p]], index.paraphrase_at[present[p] + 1]):
            target = np.int64(index.paraphrases[k])
            at = open_slot(slots, target, bits)
            if slots[at] == target:
                if n == len(reach_target):
                    reach_target = np.concatenate((reach_target, np.empty(n, np.int64)))
                    reach_line = np.concatenate((reach_line, np.empty(n, np.int64)))
                reach_target[n], reach_line[n] = number_of_slot[at], index.lines[k]
                n += 1
        reach_at[p + 1] = n
    return (
        span_at,
        spans[:, 0].copy(),
        spans[:, 1].copy(),
        span_phrase,
        reach_at,
        reach_target[:n].copy(),
        reach_line[:n].copy(),
    )
