"""Image-caption retrieval metrics (MRR and Recall@K) from a similarity matrix.

Ties count pessimistically: a wrong item scored exactly as high as the correct
one is ranked ahead of it. A model that gives every pair the same score thus gets
the worst rank, not the best, so a collapsed encoder cannot look good.
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)

RECALL_AT = (1, 5, 10)
PERCENT = 100.0
# Captions compared per step, which bounds the [chunk, num_images] boolean temporaries.
CHUNK_ROWS = 1024


def _summarise(ranks: np.ndarray, prefix: str) -> dict[str, float]:
    metrics = {f"{prefix}_mrr": PERCENT * float(np.mean(1.0 / ranks))}
    for k in RECALL_AT:
        metrics[f"{prefix}_r{k}"] = PERCENT * float(np.mean(ranks <= k))
    return metrics


def _validate(sim: np.ndarray, caption_to_image: np.ndarray) -> None:
    if sim.ndim != 2:
        raise ValueError(f"sim must be [num_captions, num_images], got shape {sim.shape}")
    if caption_to_image.shape != (sim.shape[0],):
        raise ValueError(
            f"caption_to_image has shape {caption_to_image.shape}, expected ({sim.shape[0]},)"
        )
    if not np.issubdtype(caption_to_image.dtype, np.integer):
        raise ValueError(f"caption_to_image must hold integers, got {caption_to_image.dtype}")
    out_of_range = np.flatnonzero((caption_to_image < 0) | (caption_to_image >= sim.shape[1]))
    if out_of_range.size:
        caption = int(out_of_range[0])
        raise ValueError(
            f"caption {caption}: image index {int(caption_to_image[caption])} is outside "
            f"[0, {sim.shape[1]})"
        )
    bad_rows = np.flatnonzero(~np.all(np.isfinite(sim), axis=1))
    if bad_rows.size:
        raise ValueError(f"caption {int(bad_rows[0])}: non-finite similarity")


def retrieval_metrics(sim: np.ndarray, caption_to_image: np.ndarray) -> dict[str, float]:
    """Caption->image and image->caption MRR and R@1/5/10, all x100.

    Args:
      sim: [num_captions, num_images] similarity scores (higher is closer).
      caption_to_image: [num_captions] index of each caption's own image.

    Returns:
      ``c2i_mrr``, ``c2i_r1``, ``c2i_r5``, ``c2i_r10``: each caption ranks all
      images; ``i2c_*``: each image ranks all captions, and its rank is that of
      its best-placed own caption. Images without captions are left out of the
      ``i2c`` metrics (and logged). ``num_captions`` and ``num_images`` (the
      images with at least one caption) give the counts behind the averages.
    """
    sim = np.asarray(sim)
    caption_to_image = np.asarray(caption_to_image)
    _validate(sim, caption_to_image)
    num_captions, num_images = sim.shape
    own_scores = sim[np.arange(num_captions), caption_to_image]
    best_own_score = np.full(num_images, -np.inf, dtype=sim.dtype)
    np.maximum.at(best_own_score, caption_to_image, own_scores)
    has_caption = np.isfinite(best_own_score)

    caption_ranks = np.empty(num_captions, dtype=np.int64)
    image_ranks = np.ones(num_images, dtype=np.int64)
    for start in range(0, num_captions, CHUNK_ROWS):
        block = sim[start : start + CHUNK_ROWS]
        rows = np.arange(block.shape[0])
        own_images = caption_to_image[start : start + CHUNK_ROWS]
        # Pessimistic ties: ">=" puts equal-scored wrong items ahead; the own item counts itself.
        caption_ranks[start : start + block.shape[0]] = np.sum(
            block >= own_scores[start : start + block.shape[0], None], axis=1
        )
        ahead_of_image = block >= best_own_score[None, :]
        ahead_of_image[rows, own_images] = False
        image_ranks += np.sum(ahead_of_image, axis=0)

    if not has_caption.all():
        logger.info(
            "retrieval: %d of %d images have no caption and are left out of i2c",
            int((~has_caption).sum()),
            num_images,
        )
    metrics = _summarise(caption_ranks, "c2i")
    metrics.update(_summarise(image_ranks[has_caption], "i2c"))
    metrics["num_captions"] = num_captions
    metrics["num_images"] = int(has_caption.sum())
    return metrics
