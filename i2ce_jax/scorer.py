"""Score candidate captions with a trained I2CE model, pycocoevalcap-style.

``I2CEScorer.from_checkpoint(workdir).compute_score(gts, res)`` takes the same
dicts as pycocoevalcap (id -> list of strings, one candidate per id) and
returns ``(corpus_score, per_caption_scores)``. A caption's score is the pooled
cosine similarity of its intrinsic vector with each reference's; captions are
encoded one row each in fixed-shape batches, so a score depends neither on the
other captions of the call nor on the batch size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from capsim import text
from capsim.errors import CaptionError, CheckpointError
from capsim.eval.pooling import pool_similarities
from capsim.train.checkpoint import Checkpointer, find_model_checkpoint
from capsim.train.writers import load_config
from i2ce_jax.model import I2CEAutoencoder, build_model

VOCAB_FILE = "vocab.json"
ZERO_NORM = 1e-8


@nnx.jit
def _encode_unit(model: I2CEAutoencoder, ids: jax.Array, mask: jax.Array):
    vectors = model.encode(ids, mask)
    norms = jnp.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / jnp.maximum(norms, ZERO_NORM), norms[:, 0]


def encode_rows(
    model: I2CEAutoencoder, ids: np.ndarray, mask: np.ndarray, batch_size: int = 256
) -> tuple[np.ndarray, np.ndarray]:
    """Unit intrinsic vectors and raw norms of padded rows, in fixed-shape batches.

    Every batch has ``batch_size`` rows (the last is padded with dummy rows that
    are dropped), so one compilation serves all calls and a row's result does not
    depend on its neighbours.
    """
    n = len(ids)
    padded = -(-n // batch_size) * batch_size
    ids_arr = np.zeros((padded, ids.shape[1]), np.int32)
    mask_arr = np.zeros((padded, ids.shape[1]), bool)
    ids_arr[:n], mask_arr[:n] = ids, mask
    mask_arr[n:, 0] = True  # a dummy row holds one token
    vectors, norms = [], []
    for start in range(0, padded, batch_size):
        rows = slice(start, start + batch_size)
        v, nrm = _encode_unit(model, jnp.asarray(ids_arr[rows]), jnp.asarray(mask_arr[rows]))
        vectors.append(np.asarray(v))
        norms.append(np.asarray(nrm))
    return np.concatenate(vectors)[:n], np.concatenate(norms)[:n]


@dataclasses.dataclass
class ReferenceSimilarities:
    """Cosine similarity of each candidate with each of its references (padded with NaN)."""

    ids: list
    similarities: np.ndarray  # [N, R]
    mask: np.ndarray  # [N, R], True on real references


def validate_gts_res(gts: Mapping, res: Mapping) -> None:
    """Checks pycocoevalcap's contract, naming the id at fault."""
    for key, candidates in res.items():
        if key not in gts:
            raise CaptionError(key, "candidate id has no references in gts")
        if not isinstance(candidates, Sequence) or isinstance(candidates, str) or len(candidates) != 1:
            raise CaptionError(key, "res must map each id to a list holding exactly one caption")
        refs = gts[key]
        if not isinstance(refs, Sequence) or isinstance(refs, str) or len(refs) == 0:
            raise CaptionError(key, "gts must map each id to a non-empty list of reference strings")


class I2CEScorer:
    """Caption scorer over a trained I2CE encoder."""

    def __init__(
        self,
        model: I2CEAutoencoder,
        vocab: text.Vocab,
        *,
        max_tokens: int = 64,
        pooling: str = "top-3",
        batch_size: int = 256,
    ):
        self.vocab = vocab
        self.max_tokens = max_tokens
        self.pooling = pooling
        self.batch_size = batch_size
        model.eval()
        self.model = model

    @classmethod
    def from_checkpoint(cls, path: str | Path, **kwargs) -> I2CEScorer:
        """Loads a scorer from a training workdir (or its ``best``/``checkpoints`` folder)."""
        manager_dir = find_model_checkpoint(path)
        workdir = manager_dir if (manager_dir / "config.json").exists() else manager_dir.parent
        for needed in ("config.json", VOCAB_FILE):
            if not (workdir / needed).exists():
                raise CheckpointError(f"{workdir} has no {needed}; is it an I2CE training workdir?")
        config = load_config(workdir)
        vocab = text.Vocab.load(workdir / VOCAB_FILE)
        model = build_model(config, len(vocab))
        manager = Checkpointer(manager_dir, read_only=True)
        manager.restore(model=model)
        manager.close()
        kwargs.setdefault("pooling", config.scorer.pooling)
        kwargs.setdefault("max_tokens", config.scorer.max_tokens)
        return cls(model, vocab, **kwargs)

    def embed(self, texts: Sequence[str], ids: Sequence[object] | None = None) -> np.ndarray:
        """Unit-norm intrinsic vectors [N, H]; a caption that encodes to zero is an error."""
        encoded = text.encode(self.vocab, texts, self.max_tokens, ids=ids, too_long="error")
        vectors, norms = encode_rows(self.model, encoded.ids, encoded.mask, self.batch_size)
        zero = np.flatnonzero(norms < ZERO_NORM)
        if zero.size:
            bad = ids[zero[0]] if ids is not None else int(zero[0])
            raise CaptionError(bad, "encodes to a zero vector; its similarity is undefined")
        return vectors

    def reference_similarities(self, gts: Mapping, res: Mapping) -> ReferenceSimilarities:
        validate_gts_res(gts, res)
        keys = list(res)
        unique: dict[str, int] = {}
        unique_ids: list[str] = []

        def index_of(sentence: str, where: str) -> int:
            if sentence not in unique:
                unique[sentence] = len(unique)
                unique_ids.append(where)
            return unique[sentence]

        cand_rows = [index_of(res[k][0], f"{k}") for k in keys]
        max_refs = max(len(gts[k]) for k in keys)
        ref_rows = np.full((len(keys), max_refs), -1, np.int64)
        for i, k in enumerate(keys):
            for j, ref in enumerate(gts[k]):
                ref_rows[i, j] = index_of(ref, f"{k}/ref{j}")
        vectors = self.embed(list(unique), ids=unique_ids)
        mask = ref_rows >= 0
        sims = np.einsum("nd,nrd->nr", vectors[cand_rows], vectors[np.maximum(ref_rows, 0)])
        return ReferenceSimilarities(keys, np.where(mask, sims, np.nan), mask)

    def compute_score(self, gts: Mapping, res: Mapping) -> tuple[float, np.ndarray]:
        """pycocoevalcap's contract: (mean score, per-caption scores in ``res`` order)."""
        if not res:
            raise ValueError("res is empty: nothing to score")
        sims = self.reference_similarities(gts, res)
        scores = pool_similarities(
            np.nan_to_num(sims.similarities), sims.mask, mode=self.pooling
        )
        return float(np.mean(scores)), scores

    def method(self) -> str:
        return "I2CE"
