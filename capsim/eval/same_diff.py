"""COCO-Test / Pin-Test style evaluation: same-image against different-image caption pairs.

The VTFN paper builds 1,000 pairs of captions of one image (related) and 1,000
pairs of captions of two images (unrelated) from held-out images, then reports
the Pearson correlation of the model's cosine similarity with the binary label.
We also report ROC-AUC, which does not depend on how similarities are scaled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from scipy import stats

from capsim.eval.sts import correlations_x100, embed_pairs

SAME_IMAGE = 1
DIFFERENT_IMAGE = -1
DEFAULT_NUM_PAIRS = 1000
PERCENT = 100.0


def make_same_diff_pairs(
    captions_by_image: Mapping[str, Sequence[str]],
    num_pairs: int = DEFAULT_NUM_PAIRS,
    seed: int = 0,
) -> list[tuple[str, str, int]]:
    """``num_pairs`` same-image pairs (label +1) followed by ``num_pairs`` different-image pairs (-1).

    Same-image pairs take two different caption texts of one image; every
    eligible image is used once before any is used again. Different-image
    pairs take one caption each of two distinct images. Images are visited in
    sorted id order, so the result depends only on the data and ``seed``, not on
    the mapping's insertion order. Pass held-out images only.
    """
    if num_pairs < 1:
        raise ValueError(f"num_pairs must be positive, got {num_pairs}")
    captions = {
        image_id: sorted({text.strip() for text in texts if text.strip()})
        for image_id, texts in sorted(captions_by_image.items())
    }
    with_two = [image_id for image_id, texts in captions.items() if len(texts) >= 2]
    with_one = [image_id for image_id, texts in captions.items() if texts]
    if not with_two:
        raise ValueError("no image has two different captions, so no same-image pair exists")
    if len(with_one) < 2:
        raise ValueError("fewer than two images have captions, so no different-image pair exists")

    rng = np.random.default_rng(seed)
    pairs: list[tuple[str, str, int]] = []
    rounds = math.ceil(num_pairs / len(with_two))
    chosen = np.concatenate([rng.permutation(len(with_two)) for _ in range(rounds)])[:num_pairs]
    for index in chosen:
        texts = captions[with_two[index]]
        first, second = rng.choice(len(texts), size=2, replace=False)
        pairs.append((texts[first], texts[second], SAME_IMAGE))
    for _ in range(num_pairs):
        image_a, image_b = rng.choice(len(with_one), size=2, replace=False)
        texts_a, texts_b = captions[with_one[image_a]], captions[with_one[image_b]]
        pairs.append(
            (
                texts_a[rng.integers(len(texts_a))],
                texts_b[rng.integers(len(texts_b))],
                DIFFERENT_IMAGE,
            )
        )
    return pairs


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """ROC-AUC as the Mann-Whitney U statistic; a tie between a positive and a negative counts 1/2."""
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    num_positive = int(positive.sum())
    num_negative = positive.size - num_positive
    if num_positive == 0 or num_negative == 0:
        raise ValueError("ROC-AUC needs at least one positive and one negative pair")
    ranks = stats.rankdata(scores)  # average ranks give the 1/2 credit for ties
    u_statistic = ranks[positive].sum() - num_positive * (num_positive + 1) / 2
    return float(u_statistic / (num_positive * num_negative))


def evaluate_same_diff(
    embed: Callable[[list[str]], np.ndarray], pairs: Sequence[tuple[str, str, int]]
) -> dict[str, float]:
    """Pearson (cosine vs. the +1/-1 label) and ROC-AUC, both x100, and the number of pairs."""
    first = [pair[0] for pair in pairs]
    second = [pair[1] for pair in pairs]
    unknown = {pair[2] for pair in pairs} - {SAME_IMAGE, DIFFERENT_IMAGE}
    if unknown:
        raise ValueError(
            f"labels must be {SAME_IMAGE} or {DIFFERENT_IMAGE}, found {sorted(unknown)}"
        )
    labels = np.array([pair[2] for pair in pairs], dtype=np.float64)
    similarities = embed_pairs(embed, first, second, "same/diff pairs")
    auc = roc_auc(similarities, labels == SAME_IMAGE)
    pearson, _ = correlations_x100(similarities, labels, "same/diff pairs")
    return {"pearson": pearson, "auc": PERCENT * auc, "n": len(pairs)}
