"""The captions of a pycocoevalcap-style call, checked and lined up, and their n-grams
counted once as sparse matrices: what BLEU, CIDEr-D and TF-IDF pooling are computed from.

Inputs follow pycocoevalcap's contract: ``gts`` maps an id to its reference
captions and ``res`` maps an id to a one-element list with the candidate, all
already tokenized (tokens separated by spaces).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Hashable, Mapping, Sequence

import numba
import numpy as np
from scipy import sparse

from capsim.errors import CaptionError

DEFAULT_MAX_ORDER = 4  # BLEU-1..4 and CIDEr-D count n-grams up to 4 words
References = Mapping[Hashable, Sequence[str]]
Candidates = Mapping[Hashable, Sequence[str]]


def paired_captions(
    gts: References, res: Candidates
) -> tuple[list[Hashable], list[str], list[list[str]]]:
    """Checks pycocoevalcap-style inputs and lines them up in the order of ``res``.

    Returns the ids, the candidate of each id and the references of each id.
    Raises CaptionError naming the id for a missing reference list, a candidate
    list whose length is not 1, a candidate that is not a string, or an empty
    reference list or reference. An empty candidate (a captioning model's
    output can be) scores 0 on every metric, as in pycocoevalcap.
    """
    if not res:
        raise ValueError("res is empty: there is no candidate to score")
    ids, candidates, references = [], [], []
    for caption_id, hypotheses in res.items():
        if caption_id not in gts:
            raise CaptionError(caption_id, "no references")
        if isinstance(hypotheses, str) or len(hypotheses) != 1:
            raise CaptionError(
                caption_id, f"expected a list with exactly one candidate, got {hypotheses!r}"
            )
        refs = gts[caption_id]
        if isinstance(refs, str):
            raise CaptionError(caption_id, "references must be a list of strings, not one string")
        if len(refs) == 0:
            raise CaptionError(caption_id, "empty reference list")
        if not isinstance(hypotheses[0], str):
            raise CaptionError(caption_id, f"candidate must be a string, got {hypotheses[0]!r}")
        for text in refs:
            if not isinstance(text, str) or not text.strip():
                raise CaptionError(caption_id, f"empty or non-string reference {text!r}")
        ids.append(caption_id)
        candidates.append(hypotheses[0])
        references.append(list(refs))
    return ids, candidates, references


@dataclasses.dataclass(frozen=True)
class NgramCounts:
    """Sparse 1..max_order-gram counts, one row per distinct sentence.

    Attributes:
      counts: float64 [sentences, ngrams] term counts.
      order_onehot: [ngrams, max_order] one-hot of each column's n-gram order,
        so ``values @ order_onehot`` sums any per-n-gram quantity by order.
      lengths: [sentences] number of tokens.
      sentences: the distinct sentences, one per row.
    """

    counts: sparse.csr_array
    order_onehot: np.ndarray
    lengths: np.ndarray
    sentences: tuple[str, ...] = ()

    def column_keys(self) -> list[str]:
        """Each column's n-gram as its words joined by spaces: a row lists its n-grams in
        the order they are met (order by order, start by start), first occurrences only."""
        keys = [""] * self.counts.shape[1]
        max_order = self.order_onehot.shape[1]
        indptr, indices = self.counts.indptr, self.counts.indices
        for row, sentence in enumerate(self.sentences):
            tokens = sentence.split()
            met = dict.fromkeys(
                " ".join(tokens[start : start + n])
                for n in range(1, max_order + 1)
                for start in range(len(tokens) - n + 1)
            )
            for column, key in zip(indices[indptr[row] : indptr[row + 1]], met, strict=True):
                keys[column] = key
        return keys


def count_ngrams(sentences: Sequence[str], max_order: int) -> tuple[NgramCounts, np.ndarray]:
    """Counts the n-grams of each distinct sentence once (captions repeat a lot).

    Sentences are split on whitespace. Returns the counts and, for each input
    sentence, its row in them. Columns are numbered in the order the n-grams are
    first met (sentence by sentence; in a sentence, order by order, start by start),
    and each row lists its n-grams in that order: the matrix a ``Counter`` per
    sentence would build, so sums over it run in the same order.
    """
    if max_order < 1:
        raise ValueError(f"max_order must be >= 1, got {max_order}")
    row_of_sentence: dict[str, int] = {}
    input_rows = np.fromiter(
        (row_of_sentence.setdefault(s, len(row_of_sentence)) for s in sentences),
        dtype=np.int64,
        count=len(sentences),
    )
    tokens = [sentence.split() for sentence in row_of_sentence]
    lengths = np.fromiter(map(len, tokens), np.int64, len(tokens))
    flat = list(itertools.chain.from_iterable(tokens))
    vocabulary = {word: number for number, word in enumerate(dict.fromkeys(flat))}
    words = np.fromiter(map(vocabulary.__getitem__, flat), np.int64, len(flat))
    starts = np.zeros(len(tokens) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    indptr, indices, values, orders = _counted(words, starts, max_order, len(vocabulary))
    counts = sparse.csr_array(
        (values.astype(np.float64), indices, indptr), shape=(len(tokens), len(orders))
    )
    order_onehot = np.eye(max_order)[orders - 1]
    return NgramCounts(counts, order_onehot, lengths, tuple(row_of_sentence)), input_rows


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing's multiplier


@numba.njit(cache=True, nogil=True, inline="always")  # inlined: a call passing an array
def open_slot(table: np.ndarray, key: int, bits: int) -> int:
    """Where ``key`` is in the open-addressing ``table`` of keys, or the empty slot it
    goes to."""
    mask = np.int64((1 << bits) - 1)
    at = np.int64((np.uint64(key) * _GOLDEN) >> np.uint64(64 - bits))
    while table[at] != -1 and table[at] != key:
        at = (at + np.int64(1)) & mask
    return at


@numba.njit(cache=True, nogil=True)
def _counted(words: np.ndarray, starts: np.ndarray, max_order: int, vocabulary: int) -> tuple:
    """CSR (indptr, indices, values) of each sentence's 1..max_order-grams and each
    column's order. An n-gram is keyed by its (n-1)-gram's column and its last word, so
    one hash table numbers them all, in the order they are first met."""
    rows = len(starts) - 1
    bits = 16
    keys = np.full(1 << bits, -1, np.int64)
    column_at = np.empty(1 << bits, np.int64)
    orders = np.empty(1024, np.int64)
    row_seen = np.full(1024, -1, np.int64)  # the last row that met each column
    entry_of = np.empty(1024, np.int64)  # and its entry in that row
    occurrences = 0
    for r in range(rows):
        length = starts[r + 1] - starts[r]
        for n in range(min(length, max_order)):
            occurrences += length - n
    indptr = np.zeros(rows + 1, np.int64)
    indices = np.empty(occurrences, np.int64)
    values = np.zeros(occurrences, np.int64)
    previous = np.empty(max(1, np.max(starts[1:] - starts[:-1]) if rows else 1), np.int64)
    columns = 0
    entries = 0
    for r in range(rows):
        first = starts[r]
        length = starts[r + 1] - first
        for n in range(min(length, max_order)):
            for s in range(length - n):
                word = words[first + s + n]
                key = word if n == 0 else vocabulary + previous[s] * (vocabulary + 1) + word
                if 2 * (columns + 1) > (1 << bits):  # keep the table at most half full
                    bits += 1
                    old_keys, old_columns = keys, column_at
                    keys = np.full(1 << bits, -1, np.int64)
                    column_at = np.empty(1 << bits, np.int64)
                    for k in range(len(old_keys)):
                        if old_keys[k] != -1:
                            at = open_slot(keys, old_keys[k], bits)
                            keys[at], column_at[at] = old_keys[k], old_columns[k]
                at = open_slot(keys, key, bits)
                if keys[at] == -1:
                    if columns == len(orders):
                        orders = _grown(orders, -1)
                        row_seen = _grown(row_seen, -1)
                        entry_of = _grown(entry_of, -1)
                    keys[at], column_at[at] = key, columns
                    orders[columns] = n + 1
                    columns += 1
                column = column_at[at]
                previous[s] = column
                if row_seen[column] != r:
                    row_seen[column], entry_of[column] = r, entries
                    indices[entries] = column
                    entries += 1
                values[entry_of[column]] += 1
        indptr[r + 1] = entries
    return indptr, indices[:entries].copy(), values[:entries].copy(), orders[:columns].copy()


@numba.njit(cache=True, nogil=True)
def _grown(values: np.ndarray, fill: int) -> np.ndarray:
    bigger = np.full(2 * len(values), fill, values.dtype)
    bigger[: len(values)] = values
    return bigger


@dataclasses.dataclass(frozen=True)
class PairedNgrams:
    """The n-grams of a scored set, with references flattened and tagged by owner.

    Attributes:
      ngrams: counts of every distinct sentence of the set.
      candidate_rows: [pairs] row of each candidate in ``ngrams``.
      reference_rows: [refs] row of each reference, pair after pair.
      reference_owner: [refs] pair index of each reference.
      reference_slot: [refs] position of each reference in its pair's list.
      num_references: [pairs] references per pair.
      extra_rows: [extra] row of each extra sentence (e.g. an IDF corpus).
    """

    ngrams: NgramCounts
    candidate_rows: np.ndarray
    reference_rows: np.ndarray
    reference_owner: np.ndarray
    reference_slot: np.ndarray
    num_references: np.ndarray
    extra_rows: np.ndarray


def pair_ngrams(
    gts: References, res: Candidates, max_order: int, extra_sentences: Sequence[str] = ()
) -> PairedNgrams:
    """Validates the inputs and counts the n-grams of candidates, references and extras once."""
    _, candidates, references = paired_captions(gts, res)
    num_references = np.array([len(refs) for refs in references])
    flat_references = [ref for refs in references for ref in refs]
    ngrams, rows = count_ngrams([*candidates, *flat_references, *extra_sentences], max_order)
    first_extra = len(candidates) + len(flat_references)
    reference_starts = np.repeat(np.cumsum(num_references) - num_references, num_references)
    return PairedNgrams(
        ngrams=ngrams,
        candidate_rows=rows[: len(candidates)],
        reference_rows=rows[len(candidates) : first_extra],
        reference_owner=np.repeat(np.arange(len(candidates)), num_references),
        reference_slot=np.arange(len(flat_references)) - reference_starts,
        num_references=num_references,
        extra_rows=rows[first_extra:],
    )


def check_order(pairs: PairedNgrams, n: int) -> None:
    """Refuses n-grams counted to another order than the metric's ``n``."""
    counted = pairs.ngrams.order_onehot.shape[1]
    if counted != n:
        raise ValueError(f"n-grams counted to order {counted}, the metric needs order {n}")
