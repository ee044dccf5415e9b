"""ROUGE-L as pycocoevalcap 1.2 computes it (inputs as in ``capsim.metrics.bleu``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from capsim.metrics.ngram_counts import Candidates, References, paired_captions

ROUGE_BETA = 1.2


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
        """Returns (mean ROUGE-L, per-caption ROUGE-L).

        Args:
            gts: id -> reference captions, tokenized (tokens joined by spaces).
            res: id -> a one-element list with the candidate, tokenized.

        Returns:
            The mean over the candidates, and each candidate's ROUGE-L in the order of
            ``res`` (a NumPy array).

        >>> gts = {"1": ["a dog runs on the grass", "a brown dog is running"]}
        >>> res = {"1": ["a dog is running on the grass"]}
        >>> round(Rouge().compute_score(gts, res)[0], 3)
        0.78
        """
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
