"""Score candidate captions with an I2CE encoder, pycocoevalcap-style.

``I2CEScorer.pretrained().compute_score(gts, res)`` takes the same dicts as
pycocoevalcap (id -> list of strings, one candidate per id) and returns
``(corpus_score, per_caption_scores)``. A caption's score is the pooled cosine
similarity of its intrinsic vector with each reference's. ``score`` returns the
same plus the per-reference similarities and the empty candidates.

A candidate is what is being judged, so any candidate gets a score: any length
(length-bucketed batches, see capsim.embed), any words (unknown ones go through
``<unk>``), and an empty or whitespace-only candidate scores 0.0 and is counted.
Malformed input stays an error that names the id: a candidate id without
references, an empty reference list or reference, a caption that is not a string.
Each distinct sentence of a call is encoded once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from capsim import text
from capsim.checkpoints import find_model_checkpoint, restore_model
from capsim.embed import Embedded, embed_sentences, module_encoder
from capsim.errors import CaptionError, CheckpointError
from capsim.metrics.pooling import pool_similarities
from capsim.workdir import CONFIG_FILE, VOCAB_FILE, load_config
from i2ce_jax.model import build_model

ZERO_NORM = 1e-8


@dataclasses.dataclass
class Scores:
    """Everything one scoring call computed, in ``res`` order.

    ``similarities`` [N, R] holds the cosine similarity of each candidate with
    each of its references (NaN past a candidate's last reference, and 0.0 for
    an empty candidate); ``mask`` marks the real references.
    """

    ids: list
    scores: np.ndarray
    similarities: np.ndarray
    mask: np.ndarray
    empty_candidates: list

    @property
    def corpus_score(self) -> float:
        return float(np.mean(self.scores))


def _is_list_of_captions(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def validate_gts_res(gts: Mapping, res: Mapping) -> None:
    """Checks pycocoevalcap's contract, naming the id at fault."""
    if not res:
        raise ValueError("res is empty: nothing to score")
    for key, candidates in res.items():
        if key not in gts:
            raise CaptionError(key, "candidate id has no references in gts")
        if not _is_list_of_captions(candidates) or len(candidates) != 1:
            raise CaptionError(key, "res must map each id to a list holding exactly one caption")
        if not isinstance(candidates[0], str | bytes):
            raise CaptionError(key, f"caption must be a string, got {type(candidates[0]).__name__}")
        refs = gts[key]
        if not _is_list_of_captions(refs) or len(refs) == 0:
            raise CaptionError(key, "gts must map each id to a non-empty list of reference strings")
        for j, ref in enumerate(refs):
            if not isinstance(ref, str | bytes):
                raise CaptionError(
                    f"{key}/ref{j}", f"reference must be a string, got {type(ref).__name__}"
                )


@dataclasses.dataclass
class SentenceTable:
    """The distinct sentences of a call, each encoded once, and where the captions sit in it.

    ``candidate_rows`` [N] and ``reference_rows`` [N, R] index ``sentences`` (-1 past a
    candidate's last reference); ``names`` name each sentence in errors.
    """

    keys: list
    sentences: list
    names: list[str]
    candidate_rows: np.ndarray
    reference_rows: np.ndarray

    @classmethod
    def of(cls, gts: Mapping, res: Mapping) -> SentenceTable:
        keys = list(res)
        unique: dict[object, int] = {}
        names: list[str] = []

        def row_of(sentence: object, name: str) -> int:
            if sentence not in unique:
                unique[sentence] = len(unique)
                names.append(name)
            return unique[sentence]

        cand_rows = np.array([row_of(res[k][0], str(k)) for k in keys])
        max_refs = max(len(gts[k]) for k in keys)
        ref_rows = np.full((len(keys), max_refs), -1, np.int64)
        for i, k in enumerate(keys):
            for j, ref in enumerate(gts[k]):
                ref_rows[i, j] = row_of(ref, f"{k}/ref{j}")
        return cls(keys, list(unique), names, cand_rows, ref_rows)


def _unit_vectors(embedded: Embedded, ids: Sequence[object] | None) -> np.ndarray:
    """Unit vectors [N, H] of ``unit_vectors_and_norms`` rows; a zero vector is an error
    (its similarity is undefined) unless the sentence was empty."""
    vectors, norms = embedded.vectors[:, :-1], embedded.vectors[:, -1]
    zero = np.setdiff1d(np.flatnonzero(norms < ZERO_NORM), embedded.empty)
    if zero.size:
        bad = ids[zero[0]] if ids is not None else int(zero[0])
        raise CaptionError(bad, "encodes to a zero vector; its similarity is undefined")
    return vectors


def unit_vectors_and_norms(encoder: nnx.Module, ids: jax.Array, mask: jax.Array) -> jax.Array:
    """[B, H + 1]: unit intrinsic vectors with the raw norm in the last column."""
    vectors = encoder(ids, mask)
    norms = jnp.linalg.norm(vectors, axis=-1, keepdims=True)
    return jnp.concatenate([vectors / jnp.maximum(norms, ZERO_NORM), norms], axis=-1)


class I2CEScorer:
    """Caption scorer over an I2CE sentence encoder (any module called as ``encoder(ids, mask)``)."""

    def __init__(
        self,
        encoder: nnx.Module,
        vocab: text.Vocab,
        *,
        pooling: str = "top-3",
        batch_size: int = 128,
    ):
        self.vocab = vocab
        self.pooling = pooling
        self.batch_size = batch_size
        self.encoder = encoder
        # The jit-compiled batch encoder (capsim.embed), timed alone by bench/throughput_tables/scorer_parts.py.
        self.encode_batch = module_encoder(encoder, unit_vectors_and_norms)

    @classmethod
    def from_checkpoint(cls, path: str | Path, **kwargs) -> I2CEScorer:
        """Loads a scorer from a training workdir (or its ``best``/``checkpoints`` folder)."""
        manager_dir = find_model_checkpoint(path)
        workdir = manager_dir if (manager_dir / CONFIG_FILE).exists() else manager_dir.parent
        for needed in (CONFIG_FILE, VOCAB_FILE):
            if not (workdir / needed).exists():
                raise CheckpointError(f"{workdir} has no {needed}; is it an I2CE training workdir?")
        config = load_config(workdir)
        vocab = text.Vocab.load(workdir / VOCAB_FILE)
        model = build_model(config, len(vocab))
        restore_model(manager_dir, model)
        kwargs.setdefault("pooling", config.scorer.pooling)
        return cls(model.encoder, vocab, **kwargs)

    @classmethod
    def pretrained(cls, name: str | Path = "base", **kwargs) -> I2CEScorer:
        """A scorer shipped in the package ("base", the default; "large"; "research", whose
        terms are non-commercial), or of the folder of any exported model.

        See i2ce_jax/pretrained/MODEL_CARD.md for their data and figures.
        """
        from i2ce_jax import pretrained

        encoder, vocab, meta = pretrained.load(name)
        kwargs.setdefault("pooling", meta["pooling"])
        return cls(encoder, vocab, **kwargs)

    def _embed(self, sentences: Sequence[object], ids: Sequence[object] | None) -> Embedded:
        return embed_sentences(
            self.encode_batch, self.vocab, sentences, ids=ids, batch_size=self.batch_size
        )

    def embed(self, sentences: Sequence[str], ids: Sequence[object] | None = None) -> np.ndarray:
        """Unit-norm intrinsic vectors [N, H]; an empty sentence gets the zero vector."""
        return _unit_vectors(self._embed(sentences, ids), ids)

    def score(self, gts: Mapping, res: Mapping) -> Scores:
        """Scores, per-reference similarities and empty candidates, in ``res`` order."""
        validate_gts_res(gts, res)
        table = SentenceTable.of(gts, res)
        return self.pool(table, self._embed(table.sentences, table.names))

    def pool(self, table: SentenceTable, embedded: Embedded) -> Scores:
        """The scores of ``table``'s candidates from its sentences' ``embedded`` vectors."""
        vectors = _unit_vectors(embedded, table.names)
        keys, cand_rows, ref_rows = table.keys, table.candidate_rows, table.reference_rows
        mask = ref_rows >= 0
        empty_refs = mask & np.isin(ref_rows, embedded.empty)
        if empty_refs.any():
            i, j = np.argwhere(empty_refs)[0]
            raise CaptionError(f"{keys[i]}/ref{j}", "reference is empty or whitespace only")
        empty = np.isin(cand_rows, embedded.empty)
        sims = np.einsum("nd,nrd->nr", vectors[cand_rows], vectors[np.maximum(ref_rows, 0)])
        scores = pool_similarities(sims, mask, mode=self.pooling)  # 0.0 for empty candidates
        empty_ids = [k for k, e in zip(keys, empty, strict=True) if e]
        if empty_ids:
            logging.warning("%d empty candidate(s) scored 0.0: %s", len(empty_ids), empty_ids[:10])
        return Scores(keys, scores, np.where(mask, sims, np.nan), mask, empty_ids)

    def compute_score(self, gts: Mapping, res: Mapping) -> tuple[float, np.ndarray]:
        """pycocoevalcap's contract: (mean score, per-caption scores in ``res`` order)."""
        result = self.score(gts, res)
        return result.corpus_score, result.scores

    def method(self) -> str:
        return "I2CE"
