"""TF-IDF cosine: the text-only baseline a learned caption metric has to beat.

Each caption becomes a sparse vector of unigram and bigram counts weighted by
smoothed IDF, idf = log((1 + N) / (1 + df)) + 1 (scikit-learn's
``smooth_idf``): N documents, df of them containing the n-gram. The +1 terms
keep n-grams unseen in the IDF corpus finite and give n-grams found in every
document a small positive weight instead of zero. A candidate's cosine to each
reference is pooled like the learned metrics' (default: mean of the top 3).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from scipy import sparse

from capsim.metrics.ngram_counts import Candidates, References, pair_ngrams
from capsim.metrics.pooling import DEFAULT_POOLING, pool_similarities, top_k_of_mode

TFIDF_MAX_ORDER = 2


class TfidfCosine:
    """Pooled TF-IDF cosine between a candidate and its references.

    Args:
      pooling: a pool_similarities mode ("top-3", "max", "mean", ...).
      idf_corpus: documents (token lists, or space-separated strings) whose
        document frequencies define the IDF; None uses every reference caption
        of the scored set, one document per caption.
    """

    def __init__(
        self,
        pooling: str = DEFAULT_POOLING,
        idf_corpus: Iterable[Sequence[str] | str] | None = None,
    ):
        top_k_of_mode(pooling)
        self.pooling = pooling
        self._idf_corpus = None
        if idf_corpus is not None:
            self._idf_corpus = [
                doc if isinstance(doc, str) else " ".join(doc) for doc in idf_corpus
            ]
            if not self._idf_corpus:
                raise ValueError("idf_corpus is empty: no document to count n-grams in")

    def compute_score(self, gts: References, res: Candidates) -> tuple[float, np.ndarray]:
        """Returns (mean pooled cosine, per-caption pooled cosine in the order of ``res``)."""
        pairs = pair_ngrams(gts, res, TFIDF_MAX_ORDER, extra_sentences=self._idf_corpus or ())
        counts = pairs.ngrams.counts
        documents = pairs.reference_rows if self._idf_corpus is None else pairs.extra_rows
        document_frequency = (counts[documents] > 0).sum(axis=0)
        idf = np.log((1.0 + len(documents)) / (1.0 + document_frequency)) + 1.0
        weights = counts @ sparse.diags_array(idf)
        norms = np.sqrt(weights.power(2).sum(axis=1))

        hypothesis_rows = pairs.candidate_rows[pairs.reference_owner]
        dot = weights[hypothesis_rows].multiply(weights[pairs.reference_rows]).sum(axis=1)
        norm_product = norms[hypothesis_rows] * norms[pairs.reference_rows]
        # A caption with no weighted n-gram has no direction: its cosine is 0, not 0/0.
        cosine = np.divide(dot, norm_product, out=np.zeros_like(dot), where=norm_product > 0)

        padded_shape = (len(pairs.candidate_rows), int(pairs.num_references.max()))
        sims = np.zeros(padded_shape)
        mask = np.zeros(padded_shape, dtype=bool)
        sims[pairs.reference_owner, pairs.reference_slot] = cosine
        mask[pairs.reference_owner, pairs.reference_slot] = True
        scores = pool_similarities(sims, mask, self.pooling)
        return float(scores.mean()), scores
