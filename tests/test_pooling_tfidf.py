"""Similarity pooling and the TF-IDF cosine baseline."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from test_correlation import expert_tau_c, load_expert_protocol

from capsim.errors import CaptionError
from capsim.metrics.pooling import pool_similarities
from capsim.metrics.tfidf import TfidfCosine

SIMS = np.array([[0.1, 0.5, 0.3, 0.9], [0.2, 0.8, -7.0, 99.0]])
MASK = np.array([[True, True, True, True], [True, True, False, False]])
# Hand-computed pooled values of SIMS under MASK; the padding (-7, 99) must never count.
EXPECTED_POOLED = {
    "max": [0.9, 0.8],
    "max-1": [0.9, 0.8],
    "top-2": [0.7, 0.5],
    "max-3": [(0.9 + 0.5 + 0.3) / 3, 0.5],
    "top-5": [0.45, 0.5],
    "mean": [0.45, 0.5],
}
MIN_TFIDF_TAU_C = 35.0


@pytest.mark.parametrize(("mode", "expected"), EXPECTED_POOLED.items())
def test_pooling_matches_hand_values(mode, expected):
    np.testing.assert_allclose(pool_similarities(SIMS, MASK, mode), expected, rtol=1e-12)


def test_pooling_without_mask_uses_every_entry():
    np.testing.assert_allclose(pool_similarities(SIMS[:1], None, "top-3"), [(0.9 + 0.5 + 0.3) / 3])
    np.testing.assert_allclose(pool_similarities(SIMS, None, "mean"), SIMS.mean(axis=1))


def test_pooling_rejects_bad_values_naming_the_row():
    sims = SIMS.copy()
    sims[1, 1] = np.nan
    with pytest.raises(ValueError, match="row 1 of sims has a non-finite similarity"):
        pool_similarities(sims, MASK)
    sims[1, 1], sims[0, 3] = 0.0, np.nan
    with pytest.raises(ValueError, match="row 0"):
        pool_similarities(sims, MASK)
    with pytest.raises(ValueError, match="row 1 of sims has no real reference"):
        pool_similarities(SIMS, np.array([[True] * 4, [False] * 4]))


def test_pooling_ignores_nan_padding():
    sims = SIMS.copy()
    sims[1, 3] = np.nan  # padding
    np.testing.assert_allclose(pool_similarities(sims, MASK, "top-3"), EXPECTED_POOLED["max-3"])


def test_pooling_rejects_unknown_modes_and_shapes():
    with pytest.raises(ValueError, match="unknown pooling mode 'top-0'"):
        pool_similarities(SIMS, MASK, "top-0")
    with pytest.raises(ValueError, match=r"mask shape \(2, 3\) differs"):
        pool_similarities(SIMS, MASK[:, :3], "max")
    with pytest.raises(ValueError, match="must be \\[candidates, references\\]"):
        pool_similarities(SIMS[0], None, "max")


def uni_bigrams(text: str) -> Counter:
    tokens = text.split()
    return Counter(tokens) + Counter(itertools.pairwise(tokens))


def reference_tfidf_cosine(candidate: str, reference: str, documents: list[str]) -> float:
    """Dict-based textbook TF-IDF cosine with idf = log((1 + N) / (1 + df)) + 1."""
    document_grams = [set(uni_bigrams(document)) for document in documents]

    def vector(text: str) -> dict:
        return {
            gram: count
            * (math.log((1 + len(documents)) / (1 + sum(gram in d for d in document_grams))) + 1)
            for gram, count in uni_bigrams(text).items()
        }

    first, second = vector(candidate), vector(reference)
    dot = sum(weight * second.get(gram, 0.0) for gram, weight in first.items())
    return dot / math.sqrt(sum(w * w for w in first.values()) * sum(w * w for w in second.values()))


GTS = {"p": ["a dog runs on grass", "a cat sleeps", "the dog runs"], "q": ["a dog sleeps"]}
RES = {"p": ["a dog runs"], "q": ["the cat sleeps"]}


def test_tfidf_matches_textbook_cosine_with_reference_idf():
    documents = [reference for references in GTS.values() for reference in references]
    sims_p = [reference_tfidf_cosine(RES["p"][0], ref, documents) for ref in GTS["p"]]
    sims_q = reference_tfidf_cosine(RES["q"][0], GTS["q"][0], documents)
    mean, scores = TfidfCosine("max-2").compute_score(GTS, RES)
    np.testing.assert_allclose(scores, [np.mean(sorted(sims_p)[-2:]), sims_q], rtol=1e-12)
    assert mean == pytest.approx(scores.mean())
    _, scores = TfidfCosine("max").compute_score(GTS, RES)
    np.testing.assert_allclose(scores, [max(sims_p), sims_q], rtol=1e-12)


def test_tfidf_idf_corpus_accepts_token_lists_and_strings():
    corpus = ["a dog and a cat", "the grass", "a dog runs"]
    expected = reference_tfidf_cosine(RES["q"][0], GTS["q"][0], corpus)
    for documents in (corpus, [document.split() for document in corpus]):
        _, scores = TfidfCosine("mean", idf_corpus=iter(documents)).compute_score(GTS, RES)
        assert scores[1] == pytest.approx(expected, rel=1e-12)
    with pytest.raises(ValueError, match="idf_corpus is empty"):
        TfidfCosine(idf_corpus=[])


def test_tfidf_validates_inputs():
    with pytest.raises(ValueError, match="unknown pooling mode 'best'"):
        TfidfCosine("best")
    with pytest.raises(CaptionError, match="caption 'r': no references"):
        TfidfCosine().compute_score(GTS, {"r": ["a dog"]})


def test_tfidf_kendall_tau_c_on_flickr8k_expert(shared_data):
    rows, ratings = load_expert_protocol(shared_data)
    gts = {row["key"]: row["references"] for row in rows}
    res = {row["key"]: [row["candidate"]] for row in rows}
    _, scores = TfidfCosine("top-3").compute_score(gts, res)
    tau_c = expert_tau_c(scores, ratings)
    print(f"TF-IDF cosine (top-3) Flickr8k-Expert Kendall tau-c x 100: {tau_c:.2f}")
    assert tau_c > MIN_TFIDF_TAU_C
