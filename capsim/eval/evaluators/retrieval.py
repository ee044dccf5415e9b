"""Caption <-> image retrieval on a held-out split (MRR, R@1/5/10 both ways)."""

from __future__ import annotations

from typing import Any

import numpy as np

from capsim.eval.evaluators.base import Subject
from capsim.eval.retrieval import retrieval_metrics

NORM_FLOOR = 1e-12


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), NORM_FLOOR)


class Retrieval:
    def __init__(self, split: str = "test"):
        self.split = split

    def __call__(self, subject: Subject) -> dict[str, Any] | None:
        if subject.embed_images is None:
            return None  # a text-only model has no image side to retrieve
        split = subject.split(self.split)
        captions = _unit(subject.embed([r.text for r in split.corpus.records]))
        images = _unit(subject.embed_images(split.features))
        return retrieval_metrics(captions @ images.T, split.corpus.image_index)
