"""The captions of a pycocoevalcap-style call, checked and lined up, and their n-grams
counted once as sparse matrices: what BLEU, CIDEr-D and TF-IDF pooling are computed from.

Inputs follow pycocoevalcap's contract: ``gts`` maps an id to its reference
captions and ``res`` maps an id to a one-element list with the candidate, all
already tokenized (tokens separated by spaces).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence

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
    """

    counts: sparse.csr_array
    order_onehot: np.ndarray
    lengths: np.ndarray


def count_ngrams(sentences: Sequence[str], max_order: int) -> tuple[NgramCounts, np.ndarray]:
    """Counts the n-grams of each distinct sentence once (captions repeat a lot).

    Sentences are split on whitespace. Returns the counts and, for each input
    sentence, its row in them.
    """
    if max_order < 1:
        raise ValueError(f"max_order must be >= 1, got {max_order}")
    row_of_sentence: dict[str, int] = {}
    input_rows = np.fromiter(
        (row_of_sentence.setdefault(s, len(row_of_sentence)) for s in sentences),
        dtype=np.int64,
        count=len(sentences),
    )
    column_of_ngram: dict[tuple[str, ...], int] = {}
    indptr, indices, values, lengths = [0], [], [], []
    for sentence in row_of_sentence:
        tokens = sentence.split()
        grams = Counter(
            tuple(tokens[start : start + order])
            for order in range(1, max_order + 1)
            for start in range(len(tokens) - order + 1)
        )
        for gram, count in grams.items():
            indices.append(column_of_ngram.setdefault(gram, len(column_of_ngram)))
            values.append(count)
        indptr.append(len(indices))
        lengths.append(len(tokens))
    counts = sparse.csr_array(
        (np.asarray(values, dtype=np.float64), np.asarray(indices, dtype=np.int64), indptr),
        shape=(len(row_of_sentence), len(column_of_ngram)),
    )
    orders = np.fromiter((len(g) for g in column_of_ngram), np.int64, len(column_of_ngram))
    order_onehot = np.eye(max_order)[orders - 1]
    return NgramCounts(counts, order_onehot, np.asarray(lengths, dtype=np.int64)), input_rows


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
