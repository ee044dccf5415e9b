"""BLEU-1..n as pycocoevalcap 1.2 computes it, on sparse n-gram counts.

Published caption-metric tables are pycocoevalcap numbers, quirks included, so
the scorers of ``capsim.metrics`` reproduce its quirks on purpose (each class
lists the ones it keeps) while needing no Java and running on sparse matrices
instead of per-pair Python dictionaries.

Inputs follow pycocoevalcap's contract: ``gts`` maps an id to its reference
captions and ``res`` maps an id to a one-element list with the candidate, all
already tokenized (tokens separated by spaces). Only the ids of ``res`` are
scored, in the order of ``list(res.keys())``; extra ids in ``gts`` are ignored.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from capsim.metrics.ngram_counts import (
    DEFAULT_MAX_ORDER,
    Candidates,
    PairedNgrams,
    References,
    check_order,
    pair_ngrams,
)

# pycocoevalcap's BLEU smoothing: `tiny` joins every numerator, `small` every
# denominator, so a zero count yields a tiny score instead of a zero division.
BLEU_TINY = 1e-15
BLEU_SMALL = 1e-9


class Bleu:
    """BLEU-1..n as pycocoevalcap's ``Bleu``.

    Kept quirks: the effective reference length of each candidate is the
    closest reference length (ties go to the shorter one); per-caption scores
    use the BLEU_TINY / BLEU_SMALL smoothing, which also applies a brevity
    penalty of about 1 - 1e-9 / length at equal lengths; the corpus score
    pools clipped counts and lengths over all captions before the geometric
    mean. pycocoevalcap itself only supports n <= 4.
    """

    def __init__(self, n: int = DEFAULT_MAX_ORDER):
        if n < 1:
            raise ValueError(f"BLEU order n must be >= 1, got {n}")
        self.n = n

    def compute_score(
        self, gts: References, res: Candidates
    ) -> tuple[list[float], list[list[float]]]:
        """Returns ([BLEU-1..n corpus], [per-caption BLEU-1 list, ..., BLEU-n list]).

        Args:
            gts: id -> reference captions, tokenized (tokens joined by spaces).
            res: id -> a one-element list with the candidate, tokenized; only these ids
                are scored, in their order.

        Returns:
            The corpus BLEU-1..n (clipped counts and lengths pooled over all captions),
            and for each order the per-caption scores in the order of ``res``.

        Raises:
            capsim.errors.CaptionError: an id of ``res`` has no references, or not one
                candidate (the error names the id).

        >>> gts = {"1": ["a dog runs on the grass", "a brown dog is running"]}
        >>> res = {"1": ["a dog is running on the grass"]}
        >>> corpus, per_caption = Bleu(4).compute_score(gts, res)
        >>> [round(score, 3) for score in corpus]
        [1.0, 0.913, 0.693, 0.0]
        """
        statistics = self.statistics(gts, res)
        per_caption = self.from_statistics(statistics)
        corpus = self.from_statistics(statistics.sum(axis=0, keepdims=True))
        return corpus[0].tolist(), per_caption.T.tolist()

    def statistics(self, gts: References, res: Candidates) -> np.ndarray:
        """[captions, 2n + 2]: clipped n-gram matches (n), candidate n-grams (n), candidate
        length, closest reference length. Summed over captions they give the corpus score,
        so a bootstrap resamples these rows."""
        return self.statistics_of(pair_ngrams(gts, res, self.n))

    def statistics_of(self, pairs: PairedNgrams) -> np.ndarray:
        """``statistics`` of n-grams already counted to order n, so that BLEU and CIDEr-D
        of one evaluation count them once."""
        check_order(pairs, self.n)
        counts, lengths = pairs.ngrams.counts, pairs.ngrams.lengths
        num_pairs = len(pairs.candidate_rows)

        # Clip each candidate n-gram count by its largest count in any one reference.
        max_reference_counts = sparse.csr_array((num_pairs, counts.shape[1]))
        for position in range(int(pairs.num_references.max())):
            in_slot = pairs.reference_slot == position
            placement = sparse.csr_array(
                (
                    np.ones(in_slot.sum()),
                    (pairs.reference_owner[in_slot], pairs.reference_rows[in_slot]),
                ),
                shape=(num_pairs, counts.shape[0]),
            )
            max_reference_counts = max_reference_counts.maximum(placement @ counts)
        clipped = counts[pairs.candidate_rows].minimum(max_reference_counts)
        correct = clipped @ pairs.ngrams.order_onehot  # [pairs, n]

        test_lengths = lengths[pairs.candidate_rows]
        guess = np.maximum(test_lengths[:, None] - np.arange(self.n)[None, :], 0)
        # pycocoevalcap's "closest" option: the reference length nearest the
        # candidate's, the shorter one on a tie.
        reference_lengths = lengths[pairs.reference_rows]
        distance = np.abs(reference_lengths - test_lengths[pairs.reference_owner])
        ranked = np.lexsort((reference_lengths, distance, pairs.reference_owner))
        first_of_pair = np.cumsum(pairs.num_references) - pairs.num_references
        closest_lengths = reference_lengths[ranked[first_of_pair]]
        return np.column_stack([correct, guess, test_lengths, closest_lengths]).astype(np.float64)

    def from_statistics(self, statistics: np.ndarray) -> np.ndarray:
        """[rows, n] BLEU-1..n of rows of (summed) ``statistics``."""
        n = self.n
        return self._bleu(
            statistics[:, :n],
            statistics[:, n : 2 * n],
            statistics[:, 2 * n],
            statistics[:, 2 * n + 1],
        )

    def _bleu(
        self,
        correct: np.ndarray,
        guess: np.ndarray,
        test_lengths: np.ndarray,
        reference_lengths: np.ndarray,
    ) -> np.ndarray:
        """[rows, n] smoothed cumulative BLEU-1..n with the brevity penalty."""
        precisions = (correct + BLEU_TINY) / (guess + BLEU_SMALL)
        scores = np.cumprod(precisions, axis=1) ** (1.0 / np.arange(1, self.n + 1))
        ratio = (test_lengths + BLEU_TINY) / (reference_lengths + BLEU_SMALL)
        brevity = np.exp(1.0 - 1.0 / np.minimum(ratio, 1.0))
        return scores * brevity[:, None]
