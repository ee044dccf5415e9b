"""BLEU, ROUGE-L and CIDEr-D in Python/NumPy, agreeing with pycocoevalcap 1.2.

Published caption-metric tables are pycocoevalcap numbers, quirks included, so
these scorers reproduce its quirks on purpose (each class lists the ones it
keeps) while needing no Java and running on sparse matrices instead of
per-pair Python dictionaries.

Inputs follow pycocoevalcap's contract: ``gts`` maps an id to its reference
captions and ``res`` maps an id to a one-element list with the candidate, all
already tokenized (tokens separated by spaces). Only the ids of ``res`` are
scored, in the order of ``list(res.keys())``; extra ids in ``gts`` are ignored
(CIDEr-D's document frequencies span the references of the scored ids only).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse

from capsim.eval.ngram_counts import (
    Candidates,
    PairedNgrams,
    References,
    pair_ngrams,
    paired_captions,
)

DEFAULT_MAX_ORDER = 4
# pycocoevalcap's BLEU smoothing: `tiny` joins every numerator, `small` every
# denominator, so a zero count yields a tiny score instead of a zero division.
BLEU_TINY = 1e-15
BLEU_SMALL = 1e-9
ROUGE_BETA = 1.2
DEFAULT_CIDER_SIGMA = 6.0
CIDER_SCALE = 10.0


def _check_order(pairs: PairedNgrams, n: int) -> None:
    counted = pairs.ngrams.order_onehot.shape[1]
    if counted != n:
        raise ValueError(f"n-grams counted to order {counted}, the metric needs order {n}")


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
        """Returns ([BLEU-1..n corpus], [per-caption BLEU-1 list, ..., BLEU-n list])."""
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
        _check_order(pairs, self.n)
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


def lcs_lengths(first: Sequence[str], others: Sequence[Sequence[str]]) -> list[int]:
    """Length of the longest common subsequence of ``first`` and each of ``others``.

    Hyyrö's bit-parallel algorithm: one big-integer update per token of the
    other sequence instead of a len(first) x len(other) table; the match masks of
    ``first`` are built once for all of ``others``.
    """
    match_masks: dict[str, int] = {}
    for position, token in enumerate(first):
        match_masks[token] = match_masks.get(token, 0) | (1 << position)
    all_ones = (1 << len(first)) - 1
    lengths = []
    for other in others:
        row = all_ones
        for token in other:
            matches = row & match_masks.get(token, 0)
            row = ((row + matches) | (row - matches)) & all_ones
        lengths.append(len(first) - row.bit_count())
    return lengths


class Rouge:
    """ROUGE-L as pycocoevalcap's ``Rouge``.

    Kept quirks: captions are split on single spaces (``str.split(" ")``), and
    the best precision and the best recall are taken over the references
    separately before they are combined into one F-measure with beta = 1.2.
    """

    def __init__(self, beta: float = ROUGE_BETA):
        self.beta = beta

    def compute_score(self, gts: References, res: Candidates) -> tuple[float, np.ndarray]:
        """Returns (mean ROUGE-L, per-caption ROUGE-L)."""
        _, candidates, references = paired_captions(gts, res)
        scores = np.array(
            [self._score(c, refs) for c, refs in zip(candidates, references, strict=True)]
        )
        return float(scores.mean()), scores

    def _score(self, candidate: str, references: list[str]) -> float:
        candidate_tokens = candidate.split(" ")
        reference_tokens = [reference.split(" ") for reference in references]
        best_precision = best_recall = 0.0
        for tokens, common in zip(
            reference_tokens, lcs_lengths(candidate_tokens, reference_tokens), strict=True
        ):
            best_precision = max(best_precision, common / len(candidate_tokens))
            best_recall = max(best_recall, common / len(tokens))
        if best_precision == 0 or best_recall == 0:
            return 0.0
        beta_sq = self.beta**2
        return (
            (1 + beta_sq) * best_precision * best_recall / (best_recall + beta_sq * best_precision)
        )


class CiderD:
    """CIDEr-D as pycocoevalcap's ``Cider`` (which computes CIDEr-D).

    Document frequency of an n-gram = number of scored ids whose references
    contain it; idf = log(number of scored ids) - log(max(1, df)). Each
    candidate/reference pair scores, per n-gram order, the clipped cosine
    sum(min(h, r) * r) / (|h| |r|) (0 when a norm is 0), times a gaussian
    penalty on the length difference. Kept quirk: pycocoevalcap measures that
    length in bigrams (tokens - 1), so with n = 1 there is no penalty. The
    score is 10 x the mean over orders and references. Only n = 4 is
    comparable: pycocoevalcap always counts 1..4-grams whatever its n.
    """

    def __init__(self, n: int = DEFAULT_MAX_ORDER, sigma: float = DEFAULT_CIDER_SIGMA):
        if n < 1:
            raise ValueError(f"CIDEr order n must be >= 1, got {n}")
        if sigma <= 0:
            raise ValueError(f"CIDEr sigma must be > 0, got {sigma}")
        self.n = n
        self.sigma = sigma

    def compute_score(self, gts: References, res: Candidates) -> tuple[float, np.ndarray]:
        """Returns (mean CIDEr-D, per-caption CIDEr-D)."""
        scores = self.scores_of(pair_ngrams(gts, res, self.n))
        return float(scores.mean()), scores

    def scores_of(self, pairs: PairedNgrams) -> np.ndarray:
        """Per-caption CIDEr-D of n-grams already counted to order n (as for
        Bleu.statistics_of)."""
        _check_order(pairs, self.n)
        counts, order_onehot = pairs.ngrams.counts, pairs.ngrams.order_onehot
        num_pairs = len(pairs.candidate_rows)

        owner_of_reference = sparse.csr_array(
            (
                np.ones(len(pairs.reference_rows)),
                (pairs.reference_owner, pairs.reference_rows),
            ),
            shape=(num_pairs, counts.shape[0]),
        )
        in_pair_references = owner_of_reference @ (counts > 0).astype(np.float64)
        document_frequency = (in_pair_references > 0).sum(axis=0)
        idf = np.log(float(num_pairs)) - np.log(np.maximum(1.0, document_frequency))
        weights = counts @ sparse.diags_array(idf)
        norms = np.sqrt(weights.power(2) @ order_onehot)  # [sentences, n]

        hypothesis_rows = pairs.candidate_rows[pairs.reference_owner]
        hypotheses, refs = weights[hypothesis_rows], weights[pairs.reference_rows]
        clipped_dot = hypotheses.minimum(refs).multiply(refs) @ order_onehot
        norm_product = norms[hypothesis_rows] * norms[pairs.reference_rows]
        cosine = np.divide(
            clipped_dot, norm_product, out=np.zeros_like(clipped_dot), where=norm_product > 0
        )

        # pycocoevalcap measures length by the bigrams in the vectors: none when n == 1.
        bigram_counts = np.maximum(pairs.ngrams.lengths - 1, 0) * (self.n >= 2)
        length_gap = bigram_counts[hypothesis_rows] - bigram_counts[pairs.reference_rows]
        penalty = np.exp(-(length_gap.astype(np.float64) ** 2) / (2 * self.sigma**2))

        per_pair = np.zeros((num_pairs, self.n))
        np.add.at(per_pair, pairs.reference_owner, cosine * penalty[:, None])
        return per_pair.mean(axis=1) / pairs.num_references * CIDER_SCALE


def compute_ngram_metrics(gts: References, res: Candidates) -> dict[str, np.ndarray]:
    """Per-caption BLEU-1..4, ROUGE-L and CIDEr (CIDEr-D), in the order of ``res``."""
    _, bleu = Bleu(DEFAULT_MAX_ORDER).compute_score(gts, res)
    metrics = {f"BLEU-{order + 1}": np.asarray(s) for order, s in enumerate(bleu)}
    metrics["ROUGE-L"] = Rouge().compute_score(gts, res)[1]
    metrics["CIDEr"] = CiderD().compute_score(gts, res)[1]
    return metrics
