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

A caption of several sentences is scored by sentences (issue 60, docs/long_captions.md):
with ``sentences="auto"`` (the default) a candidate goes *whole* when it and each of its
references are one sentence (capsim.metrics.sentences.split_sentences), exactly as
before, and *by sentences* otherwise: each reference's score is the F of a sentence
alignment (capsim.metrics.sentence_alignment), and those are pooled over references as
before. ``sentences="whole"`` or ``"sentences"`` forces either way; ``Scores.ways``
records the way each caption went.

Scorer 2 (issue 69, the default) mixes word-level evidence into every sentence pair it
compares (capsim.metrics.word_alignment): the model's word vectors aligned word by word,
and words outside the vocabulary matched by their surface form, so one wrong word shows.
``scorer=1`` is the scorer before it, bit for bit, for reproducing published numbers;
``Scores.scorer`` and ``I2CEScorer.version`` name the one used.
"""

from __future__ import annotations

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
from capsim.metrics.pooling import pool_similarities, top_k_of_mode
from capsim.metrics.sentence_alignment import align, check_aggregation
from capsim.metrics.word_alignment import (
    SentenceWords,
    WordEvidence,
    WordVectors,
    with_word_evidence,
)
from capsim.workdir import CONFIG_FILE, VOCAB_FILE, load_config
from i2ce_jax.model import build_model
from i2ce_jax.scores import DEFAULT_SCORER, Scores, validate_gts_res
from i2ce_jax.sentence_plan import (
    AUTO,
    SENTENCE_MODES,
    SENTENCES,
    WHOLE,
    AlignedRows,
    SentencePlan,
    SentenceTable,
)

ZERO_NORM = 1e-8
WEIGHTINGS = ("none", "length")
# Candidates aligned per NumPy block: [block, refs, M, S] similarities stay small.
ALIGN_BLOCK = 256
# Scorer versions and the word evidence of each (chosen in bench/quality/word_evidence.py).
WORD_EVIDENCE: dict[int, WordEvidence | None] = {
    1: None,
    2: WordEvidence(weight=0.5, power=16.0, beta=0.0),
}


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
        sentences: str = AUTO,
        aggregation: str = "mean",
        weighting: str = "none",
        beta: float = 1.0,
        scorer: int = DEFAULT_SCORER,
        word_evidence: WordEvidence | None = None,
        name: str = "",
    ):
        """Args:
          encoder: the sentence encoder, called as ``encoder(ids, mask)``.
          vocab: its vocabulary.
          pooling: how a candidate's per-reference scores are pooled (capsim.metrics.pooling).
          batch_size: encoder batch rows.
          sentences: ``"auto"`` (several sentences go by sentences), ``"whole"`` (one vector
            per caption, the scorer before issue 60) or ``"sentences"`` (always aligned).
          aggregation: over sentences, ``"mean"``, ``"min"`` or ``"softmin-T"``.
          weighting: ``"none"`` or ``"length"`` (a sentence weighs its token count).
          beta: the F-beta of precision and recall (1: F1; 0: precision alone).
            The defaults (mean, none, 1) were chosen on generated long-caption pairs,
            every setting tried listed in docs/long_captions.md.
          scorer: the version (``WORD_EVIDENCE``): 2 mixes in word evidence, 1 does not.
          word_evidence: another mix than the version's (for benches; needs scorer 2).
          name: the model's name in ``version``.

        Raises:
          ValueError: for an unknown pooling, sentence mode, aggregation, weighting or
            scorer, or word evidence for an encoder without a word-vector table.
        """
        if scorer not in WORD_EVIDENCE:
            raise ValueError(f"unknown scorer {scorer!r}; use one of {sorted(WORD_EVIDENCE)}")
        if word_evidence is not None and scorer == 1:
            raise ValueError("scorer 1 has no word evidence; use scorer 2")
        self.scorer = scorer
        self.name = name
        self.word_evidence = word_evidence or WORD_EVIDENCE[scorer]
        self.word_vectors = None
        if self.word_evidence is not None:
            table = getattr(getattr(encoder, "embed", None), "embedding", None)
            if table is None:
                raise ValueError("word evidence reads encoder.embed.embedding; use scorer 1")
            self.word_vectors = WordVectors.of(vocab, np.asarray(table[...]))
        top_k_of_mode(pooling)
        check_aggregation(aggregation)
        if sentences not in SENTENCE_MODES:
            raise ValueError(f"unknown sentences mode {sentences!r}; use one of {SENTENCE_MODES}")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"unknown weighting {weighting!r}; use one of {WEIGHTINGS}")
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        self.vocab = vocab
        self.pooling = pooling
        self.batch_size = batch_size
        self.sentences = sentences
        self.aggregation = aggregation
        self.weighting = weighting
        self.beta = beta
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
        kwargs.setdefault("name", str(path))
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
        kwargs.setdefault("name", str(name))
        return cls(encoder, vocab, **kwargs)

    def _embed(self, sentences: Sequence[object], ids: Sequence[object] | None) -> Embedded:
        return embed_sentences(
            self.encode_batch, self.vocab, sentences, ids=ids, batch_size=self.batch_size
        )

    def embed(self, sentences: Sequence[str], ids: Sequence[object] | None = None) -> np.ndarray:
        """Unit-norm intrinsic vectors [N, H]; an empty sentence gets the zero vector."""
        return _unit_vectors(self._embed(sentences, ids), ids)

    def score(self, gts: Mapping, res: Mapping) -> Scores:
        """Scores, per-reference similarities, the way each caption went and the empty
        candidates, in ``res`` order.

        Raises:
          CaptionError: naming the id, for input that breaks pycocoevalcap's contract.
        """
        validate_gts_res(gts, res)
        plan = SentencePlan.of(gts, res, self.sentences)
        if not plan.aligned:  # every caption whole: the scorer before issue 60, call for call
            table = SentenceTable.of(gts, res)
            result = self.pool(table, self._embed(table.sentences, table.names))
            result.ways = [WHOLE] * len(result.ids)
            result.scorer = self.scorer
            return result
        whole_keys = [k for k in res if k not in plan.aligned]
        table = SentenceTable.of(gts, {k: res[k] for k in whole_keys}) if whole_keys else None
        strings = list(table.sentences) if table else []
        names = list(table.names) if table else []
        rows = plan.rows(strings, names)
        embedded = self._embed(strings, names)
        return self._merge(gts, res, table, plan, rows, embedded)

    def _merge(
        self,
        gts: Mapping,
        res: Mapping,
        table: SentenceTable | None,
        plan: SentencePlan,
        rows: AlignedRows,
        embedded: Embedded,
    ) -> Scores:
        """Both ways' scores from one embedding call, back in ``res`` order."""
        keys = list(res)
        where = {k: i for i, k in enumerate(keys)}
        width = max(len(gts[k]) for k in keys)
        scores = np.zeros(len(keys))
        sims, precision, recall = (np.full((len(keys), width), np.nan) for _ in range(3))
        ways = [WHOLE] * len(keys)
        empty_ids: list = []
        if table is not None:
            count = len(table.sentences)
            whole = self.pool(
                table, Embedded(embedded.vectors[:count], embedded.empty[embedded.empty < count])
            )
            at = [where[k] for k in whole.ids]
            scores[at] = whole.scores
            sims[at, : whole.similarities.shape[1]] = whole.similarities
            empty_ids = list(whole.empty_candidates)
        aligned = self.align(rows, embedded)
        at = [where[k] for k in rows.keys]
        scores[at] = aligned.scores
        sims[at, : rows.width] = aligned.similarities
        precision[at, : rows.width] = aligned.precision
        recall[at, : rows.width] = aligned.recall
        for i in at:
            ways[i] = SENTENCES
        empty_ids += aligned.empty_candidates
        mask = np.arange(width)[None, :] < np.array([len(gts[k]) for k in keys])[:, None]
        empty_ids.sort(key=where.__getitem__)
        return Scores(keys, scores, sims, mask, empty_ids, ways, precision, recall, self.scorer)

    def align(self, rows: AlignedRows, embedded: Embedded) -> Scores:
        """The by-sentences scores of ``rows``' candidates from the call's ``embedded``
        sentences: per reference the F of a sentence alignment, pooled over references.

        Raises:
          CaptionError: naming the reference, for a reference with no sentence to encode.
        """
        vectors = _unit_vectors(embedded, rows.names)
        present = np.ones(len(vectors), bool)
        present[embedded.empty] = False
        cand = rows.candidate_rows
        ref = rows.reference_rows
        cmask = (cand >= 0) & present[np.maximum(cand, 0)]
        rmask = (ref >= 0) & present[np.maximum(ref, 0)]
        has_ref = (ref >= 0).any(axis=-1)  # [n, R]: the real references
        lost = has_ref & ~rmask.any(axis=-1)
        if lost.any():
            i, j = np.argwhere(lost)[0]
            raise CaptionError(f"{rows.keys[i]}/ref{j}", "reference is empty or whitespace only")
        empty = ~cmask.any(axis=-1)
        weights = self._weights(rows, embedded) if self.weighting == "length" else None
        words = self._words(rows.texts)
        n, width = ref.shape[:2]
        precision, recall, f = (np.full((n, width), np.nan) for _ in range(3))
        for start in range(0, n, ALIGN_BLOCK):
            block = slice(start, start + ALIGN_BLOCK)
            c = vectors[np.maximum(cand[block], 0)]  # [b, M, D]
            r = vectors[np.maximum(ref[block], 0)]  # [b, R, S, D]
            pair_sims = np.matmul(c[:, None], np.swapaxes(r, -1, -2))  # [b, R, M, S]
            if words is not None:
                pair_sims = self._mix(
                    pair_sims, cand[block][:, None, :, None], ref[block][:, :, None, :], words
                )
            # Padded references and empty candidates align against a dummy sentence; their
            # results are dropped below.
            c_ok = cmask[block].copy()
            c_ok[empty[block], 0] = True
            r_ok = rmask[block].copy()
            r_ok[..., 0] |= ~has_ref[block]
            result = align(
                pair_sims,
                c_ok[:, None, :],
                r_ok,
                aggregation=self.aggregation,
                candidate_weights=None if weights is None else weights[0][block][:, None, :],
                reference_weights=None if weights is None else weights[1][block],
                beta=self.beta,
            )
            precision[block], recall[block], f[block] = (
                result.precision,
                result.recall,
                result.score,
            )
        keep = has_ref & ~empty[:, None]
        precision, recall, f = (np.where(keep, x, np.nan) for x in (precision, recall, f))
        scores = np.zeros(n)
        if (~empty).any():
            scores[~empty] = pool_similarities(
                np.nan_to_num(f[~empty]), has_ref[~empty], mode=self.pooling
            )
        empty_ids = [k for k, e in zip(rows.keys, empty, strict=True) if e]
        if empty_ids:
            logging.warning("%d empty candidate(s) scored 0.0: %s", len(empty_ids), empty_ids[:10])
        ways = [SENTENCES] * n
        return Scores(
            rows.keys, scores, f, has_ref, empty_ids, ways, precision, recall, self.scorer
        )

    def _words(self, sentences: Sequence[str]) -> SentenceWords | None:
        """The words of a call's sentences, when this scorer weighs word evidence."""
        if self.word_vectors is None:
            return None
        return SentenceWords.of(sentences, self.word_vectors)

    def _mix(
        self, sims: np.ndarray, cand: np.ndarray, ref: np.ndarray, words: SentenceWords
    ) -> np.ndarray:
        assert self.word_vectors is not None and self.word_evidence is not None
        return with_word_evidence(sims, cand, ref, words, self.word_vectors, self.word_evidence)

    def _weights(self, rows: AlignedRows, embedded: Embedded) -> tuple[np.ndarray, np.ndarray]:
        """Token counts of the candidates' [n, M] and the references' [n, R, S] sentences."""
        lengths = np.array(
            [len(ids) - 2 if ids else 0 for ids in map(self.vocab.sentence_ids, rows.texts)],
            np.float64,
        )
        lengths = np.maximum(lengths, 1.0)
        return lengths[np.maximum(rows.candidate_rows, 0)], lengths[
            np.maximum(rows.reference_rows, 0)
        ]

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
        words = self._words(table.sentences)
        if words is not None:
            sims = self._mix(sims, cand_rows[:, None], ref_rows, words)
        scores = pool_similarities(sims, mask, mode=self.pooling)  # 0.0 for empty candidates
        empty_ids = [k for k, e in zip(keys, empty, strict=True) if e]
        if empty_ids:
            logging.warning("%d empty candidate(s) scored 0.0: %s", len(empty_ids), empty_ids[:10])
        sims = np.where(mask, sims, np.nan)
        return Scores(keys, scores, sims, mask, empty_ids, scorer=self.scorer)

    def compute_score(self, gts: Mapping, res: Mapping) -> tuple[float, np.ndarray]:
        """pycocoevalcap's contract: (mean score, per-caption scores in ``res`` order)."""
        result = self.score(gts, res)
        return result.corpus_score, result.scores

    def method(self) -> str:
        return "I2CE"

    @property
    def version(self) -> str:
        """What a paper cites: the model and the scorer version, e.g. "I2CE base, scorer 2"."""
        return f"I2CE {self.name}, scorer {self.scorer}".replace("I2CE , ", "I2CE, ")
