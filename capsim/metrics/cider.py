"""CIDEr-D as pycocoevalcap 1.2 computes it, on sparse n-gram counts (inputs as in
``capsim.metrics.bleu``). CIDEr-D's document frequencies span the references of the
scored ids only, unless a reference corpus is given (capsim.metrics.cider_idf)."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from capsim.metrics.cider_idf import CorpusIdf
from capsim.metrics.ngram_counts import (
    DEFAULT_MAX_ORDER,
    Candidates,
    PairedNgrams,
    References,
    check_order,
    pair_ngrams,
)

DEFAULT_CIDER_SIGMA = 6.0
CIDER_SCALE = 10.0


class CiderD:
    """CIDEr-D as pycocoevalcap's ``Cider`` (which computes CIDEr-D).

    Document frequency of an n-gram = number of scored ids whose references
    contain it; idf = log(number of scored ids) - log(max(1, df)). Each
    candidate/reference pair scores, per n-gram order, the clipped cosine
    ``sum(min(h, r) * r) / (|h| |r|)`` (0 when a norm is 0), times a gaussian
    penalty on the length difference. Kept quirk: pycocoevalcap measures that
    length in bigrams (tokens - 1), so with n = 1 there is no penalty. The
    score is 10 x the mean over orders and references. Only n = 4 is
    comparable: pycocoevalcap always counts 1..4-grams whatever its n.

    With ``idf`` (a reference corpus's document frequencies), df comes from the corpus
    and log(number of scored ids) becomes log(the corpus's image count), as in the
    original CIDEr code's ``coco-val-df`` mode.
    """

    def __init__(
        self,
        n: int = DEFAULT_MAX_ORDER,
        sigma: float = DEFAULT_CIDER_SIGMA,
        idf: CorpusIdf | None = None,
    ):
        if n < 1:
            raise ValueError(f"CIDEr order n must be >= 1, got {n}")
        if sigma <= 0:
            raise ValueError(f"CIDEr sigma must be > 0, got {sigma}")
        self.n = n
        self.sigma = sigma
        self.idf = idf

    def compute_score(self, gts: References, res: Candidates) -> tuple[float, np.ndarray]:
        """Returns (mean CIDEr-D, per-caption CIDEr-D).

        Args:
            gts: id -> reference captions, tokenized (tokens joined by spaces). Without a
                corpus ``idf``, the document frequencies come from these references, so
                one image alone scores 0 (pass ``idf`` for a handful of images).
            res: id -> a one-element list with the candidate, tokenized.

        Returns:
            The mean over the candidates, and each candidate's CIDEr-D in the order of
            ``res`` (a NumPy array).

        >>> gts = {
        ...     "1": ["a dog runs on the grass", "a brown dog is running"],
        ...     "2": ["two cats sleep on a sofa", "cats asleep on the couch"],
        ... }
        >>> res = {"1": ["a dog is running on the grass"], "2": ["a cat sleeps on a sofa"]}
        >>> corpus, per_caption = CiderD().compute_score(gts, res)
        >>> round(corpus, 3), per_caption.round(3).tolist()
        (2.216, [3.26, 1.173])
        """
        scores = self.scores_of(pair_ngrams(gts, res, self.n))
        return float(scores.mean()), scores

    def scores_of(self, pairs: PairedNgrams) -> np.ndarray:
        """Per-caption CIDEr-D of n-grams already counted to order n (as for
        Bleu.statistics_of)."""
        check_order(pairs, self.n)
        counts, order_onehot = pairs.ngrams.counts, pairs.ngrams.order_onehot
        num_pairs = len(pairs.candidate_rows)

        if self.idf is None:
            owner_of_reference = sparse.csr_array(
                (
                    np.ones(len(pairs.reference_rows)),
                    (pairs.reference_owner, pairs.reference_rows),
                ),
                shape=(num_pairs, counts.shape[0]),
            )
            in_pair_references = owner_of_reference @ (counts > 0).astype(np.float64)
            document_frequency = (in_pair_references > 0).sum(axis=0)
            documents = float(num_pairs)
        else:
            document_frequency = self.idf.frequencies(pairs.ngrams)
            documents = float(self.idf.images)
        idf = np.log(documents) - np.log(np.maximum(1.0, document_frequency))
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
