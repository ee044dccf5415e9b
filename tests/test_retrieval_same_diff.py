"""Retrieval ranks and same/different-image pairs against hand-computed values."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from capsim.eval import retrieval
from capsim.eval.retrieval import retrieval_metrics
from capsim.eval.same_diff import evaluate_same_diff, make_same_diff_pairs, roc_auc

# 4 captions x 4 images; captions 0 and 1 describe image 0, caption 2 image 1, caption 3 image 2,
# image 3 has no caption. Ties are ranked pessimistically (a tied wrong item goes first).
SIM = np.array(
    [
        [0.9, 0.1, 0.8, 0.0],  # own 0.9: rank 1
        [0.5, 0.5, 0.7, 0.0],  # own 0.5, tie with image 1, image 2 higher: rank 3
        [0.3, 0.2, 0.4, 0.0],  # own 0.2, images 0 and 2 higher: rank 3
        [0.1, 0.6, 0.8, 0.0],  # own 0.8: rank 1
    ]
)
CAPTION_TO_IMAGE = np.array([0, 0, 1, 2])
# image -> caption, best own caption: image 0 by caption 0 (0.9, nothing above): rank 1;
# image 1 by caption 2 (0.2; captions 1 and 3 higher): rank 3;
# image 2 by caption 3 (0.8; caption 0 ties): rank 2.
C2I_RANKS = np.array([1, 3, 3, 1])
I2C_RANKS = np.array([1, 3, 2])


def test_retrieval_hand_made_matrix_with_ties():
    metrics = retrieval_metrics(SIM, CAPTION_TO_IMAGE)
    assert metrics["c2i_mrr"] == pytest.approx(100 * np.mean(1 / C2I_RANKS))
    assert metrics["c2i_mrr"] == pytest.approx(100 * 2 / 3)
    assert metrics["c2i_r1"] == pytest.approx(50.0)
    assert metrics["c2i_r5"] == metrics["c2i_r10"] == pytest.approx(100.0)
    assert metrics["i2c_mrr"] == pytest.approx(100 * 11 / 18)
    assert metrics["i2c_r1"] == pytest.approx(100 / 3)
    assert metrics["i2c_r5"] == pytest.approx(100.0)
    assert (metrics["num_captions"], metrics["num_images"]) == (4, 3)


def test_recall_at_5_and_10():
    """Captions whose own image ranks 1st, 6th and 11th among 12 images."""
    own_ranks = [1, 6, 11]
    sim = np.zeros((3, 12))
    for caption, rank in enumerate(own_ranks):
        others = [image for image in range(12) if image != caption][: rank - 1]
        sim[caption, others] = 1.0
        sim[caption, caption] = 0.5
    metrics = retrieval_metrics(sim, np.arange(3))
    assert metrics["c2i_mrr"] == pytest.approx(100 * (1 + 1 / 6 + 1 / 11) / 3)
    assert metrics["c2i_r1"] == metrics["c2i_r5"] == pytest.approx(100 / 3)
    assert metrics["c2i_r10"] == pytest.approx(200 / 3)


def test_chunking_does_not_change_results(monkeypatch):
    rng = np.random.default_rng(0)
    sim = rng.normal(size=(23, 7)).round(1)  # rounding makes ties
    caption_to_image = rng.integers(0, 7, size=23)
    expected = retrieval_metrics(sim, caption_to_image)
    monkeypatch.setattr(retrieval, "CHUNK_ROWS", 4)
    assert retrieval_metrics(sim, caption_to_image) == expected


def test_constant_similarities_get_worst_ranks():
    metrics = retrieval_metrics(np.zeros((4, 4)), np.arange(4))
    assert metrics["c2i_mrr"] == pytest.approx(25.0)
    assert metrics["c2i_r1"] == 0.0


@pytest.mark.parametrize(
    ("sim", "caption_to_image", "message"),
    [
        (SIM, np.array([0, 0, 9, 2]), r"caption 2: image index 9 is outside \[0, 4\)"),
        (SIM, np.array([0, 0, 1]), r"caption_to_image has shape \(3,\), expected \(4,\)"),
        (np.where(np.eye(4, dtype=bool), np.nan, SIM), CAPTION_TO_IMAGE, "caption 0: non-finite"),
    ],
)
def test_retrieval_rejects_bad_input(sim, caption_to_image, message):
    with pytest.raises(ValueError, match=message):
        retrieval_metrics(sim, caption_to_image)


CAPTIONS = {f"img{i}": [f"image {i} caption {j}" for j in range(3)] for i in range(6)}


def test_pairs_are_same_then_different_image():
    image_of = {text: image for image, texts in CAPTIONS.items() for text in texts}
    pairs = make_same_diff_pairs(CAPTIONS, num_pairs=10, seed=3)
    assert len(pairs) == 20
    for first, second, label in pairs[:10]:
        assert label == 1 and first != second and image_of[first] == image_of[second]
    for first, second, label in pairs[10:]:
        assert label == -1 and image_of[first] != image_of[second]
    # 10 pairs from 6 images: every image is used before any repeats
    assert len({image_of[first] for first, _, _ in pairs[:6]}) == 6


def test_pairs_are_deterministic():
    pairs = make_same_diff_pairs(CAPTIONS, num_pairs=50, seed=7)
    assert make_same_diff_pairs(CAPTIONS, num_pairs=50, seed=7) == pairs
    assert (
        make_same_diff_pairs(dict(reversed(list(CAPTIONS.items()))), num_pairs=50, seed=7) == pairs
    )
    assert make_same_diff_pairs(CAPTIONS, num_pairs=50, seed=8) != pairs


def test_same_pairs_need_two_different_captions():
    captions = {"a": ["dup", "dup "], "b": ["one", "two"], "c": ["three"]}
    pairs = make_same_diff_pairs(captions, num_pairs=5, seed=0)
    assert all({first, second} == {"one", "two"} for first, second, _ in pairs[:5])
    with pytest.raises(ValueError, match="no image has two different captions"):
        make_same_diff_pairs({"a": ["dup", "dup"], "b": ["x"]}, num_pairs=1)
    with pytest.raises(ValueError, match="fewer than two images"):
        make_same_diff_pairs({"a": ["x", "y"]}, num_pairs=1)


def test_roc_auc_hand_computed_with_ties():
    # positives 0.9, 0.5, 0.5 against negatives 0.5, 0.1: 4 wins, 2 ties (1/2 each) of 6 -> 5/6
    scores = np.array([0.9, 0.5, 0.5, 0.5, 0.1])
    positive = np.array([True, True, True, False, False])
    assert roc_auc(scores, positive) == pytest.approx(5 / 6)


def brute_force_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    wins = [
        1.0 if p > n else 0.5 if p == n else 0.0
        for p in scores[positive]
        for n in scores[~positive]
    ]
    return float(np.mean(wins))


def test_evaluate_same_diff_against_numpy():
    def embed(sentences):
        return np.stack(
            [np.random.default_rng(zlib.crc32(s.encode())).normal(size=4) for s in sentences]
        )

    pairs = make_same_diff_pairs(CAPTIONS, num_pairs=30, seed=1)
    first = embed([p[0] for p in pairs])
    second = embed([p[1] for p in pairs])
    sims = np.sum(first * second, axis=1) / (
        np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1)
    )
    labels = np.array([p[2] for p in pairs], dtype=float)
    result = evaluate_same_diff(embed, pairs)
    assert result["n"] == 60
    assert result["pearson"] == pytest.approx(100 * np.corrcoef(sims, labels)[0, 1])
    assert result["auc"] == pytest.approx(100 * brute_force_auc(sims, labels > 0))


def test_evaluate_same_diff_rejects_unknown_labels():
    with pytest.raises(ValueError, match=r"labels must be 1 or -1, found \[0\]"):
        evaluate_same_diff(lambda s: np.ones((len(s), 2)), [("a", "b", 1), ("c", "d", 0)])
