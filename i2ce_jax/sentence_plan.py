"""Which captions a scoring call aligns sentence by sentence, and where every caption and
sentence sits among the sentences the call embeds (i2ce_jax.scorer's bookkeeping).

``sentences="auto"`` sends a candidate *whole* when it and each of its references are one
sentence (capsim.metrics.sentences.split_sentences), and *by sentences* otherwise;
"whole" and "sentences" force either way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

from capsim.errors import CaptionError
from capsim.metrics.sentences import split_sentences

WHOLE, SENTENCES, AUTO = "whole", "sentences", "auto"
SENTENCE_MODES = (AUTO, WHOLE, SENTENCES)


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


def caption_text(caption: str | bytes, name: object) -> str:
    """A caption as text; bytes must be UTF-8."""
    if isinstance(caption, bytes):
        try:
            return caption.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CaptionError(name, f"bytes are not valid UTF-8 ({error})") from error
    return caption


@dataclasses.dataclass
class AlignedRows:
    """The captions that go by sentences, as rows of the call's embedded sentences.

    ``candidate_rows`` [n, M] and ``reference_rows`` [n, R, S] index the call's sentences
    (-1 for padding); ``texts`` and ``names`` are those sentences and their error names.
    """

    keys: list
    candidate_rows: np.ndarray
    reference_rows: np.ndarray
    texts: list[str]
    names: list[str]

    @property
    def width(self) -> int:
        return self.reference_rows.shape[1]


@dataclasses.dataclass
class SentencePlan:
    """Which candidates go by sentences, and their and their references' sentences."""

    aligned: dict  # key -> (candidate sentences, [reference sentences, ...])

    @classmethod
    def of(cls, gts: Mapping, res: Mapping, mode: str) -> SentencePlan:
        """Splits every caption once; ``mode`` as ``I2CEScorer``'s ``sentences``."""
        if mode == WHOLE:
            return cls({})
        memo: dict[object, list[str]] = {}

        def split(caption: str | bytes, name: str) -> list[str]:
            if caption not in memo:
                memo[caption] = split_sentences(caption_text(caption, name))
            return memo[caption]

        aligned = {}
        for key in res:
            candidate = split(res[key][0], str(key))
            if not candidate:
                continue  # empty: scored 0.0 on the whole way
            refs = [split(ref, f"{key}/ref{j}") for j, ref in enumerate(gts[key])]
            several = len(candidate) > 1 or any(len(r) > 1 for r in refs)
            if mode == SENTENCES or several:
                for j, r in enumerate(refs):
                    if not r:
                        raise CaptionError(f"{key}/ref{j}", "reference is empty or whitespace only")
                aligned[key] = (candidate, refs)
        return cls(aligned)

    def rows(self, strings: list, names: list[str]) -> AlignedRows:
        """Appends the plan's distinct sentences to ``strings``/``names`` (the call's
        sentences to embed) and returns where each caption's sentences sit."""
        unique = {s: i for i, s in enumerate(strings)}

        def row_of(sentence: str, name: str) -> int:
            if sentence not in unique:
                unique[sentence] = len(strings)
                strings.append(sentence)
                names.append(name)
            return unique[sentence]

        keys = list(self.aligned)
        most = max(len(c) for c, _ in self.aligned.values())
        width = max(len(r) for _, r in self.aligned.values())
        longest = max(len(s) for _, refs in self.aligned.values() for s in refs)
        cand = np.full((len(keys), most), -1, np.int64)
        ref = np.full((len(keys), width, longest), -1, np.int64)
        for i, key in enumerate(keys):
            candidate, refs = self.aligned[key]
            for m, sentence in enumerate(candidate):
                cand[i, m] = row_of(sentence, f"{key}/s{m}")
            for j, sentences in enumerate(refs):
                for k, sentence in enumerate(sentences):
                    ref[i, j, k] = row_of(sentence, f"{key}/ref{j}/s{k}")
        return AlignedRows(keys, cand, ref, strings, names)
