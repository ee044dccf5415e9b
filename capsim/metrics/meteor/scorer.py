"""METEOR 1.5 with pycocoevalcap's ``compute_score`` contract, without Java.

pycocoevalcap runs ``java -jar meteor-1.5.jar - - -stdio -l en -norm`` and
sends one ``SCORE`` line per caption, then one ``EVAL`` line with every
caption's statistics. This class computes the same numbers in-process:
each reference is aligned with the candidate, the best-scoring reference
(the first one on a tie) supplies the caption's statistics, and the corpus
score is recomputed from the statistics summed over all captions, as the
jar's ``EVAL`` does; it is not the mean of the per-caption scores.

pycocoevalcap removes ``|||`` from a candidate before sending it, and so does
this class; a reference holding ``|||`` or any caption holding a line break
would corrupt the jar's line protocol, so they are refused with the id.

A call's distinct captions are normalised here, in Python (plain lower-case text
takes a short path), and each word the process has not met before is looked up once
(capsim.metrics.meteor.lexicon); the word numbering, the phrase finder, the matchers,
the alignment search and the scores run compiled (capsim.metrics.meteor.tables,
.matching, .alignment, .statistics), in threads beside the caller.
"""

from __future__ import annotations

import concurrent.futures
import functools
import itertools
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path

import numpy as np

from capsim.errors import CaptionError
from capsim.metrics.meteor import lexicon, matching, resources, statistics, tables
from capsim.metrics.meteor.normalize import token_text
from capsim.metrics.meteor.statistics import CHUNKS

FIELD_SEPARATOR = "|||"  # METEOR's stdio protocol separator
MAX_THREADS = 4  # threads that run the compiled search side by side, by default
THREADS_VARIABLE = "CAPSIM_METEOR_THREADS"
PART_MIN_CAPTIONS = 64  # a call is split into parts of at least this many captions

References = Mapping[Hashable, Sequence[str]]
Candidates = Mapping[Hashable, Sequence[str]]


def meteor_from_stats(stats: Sequence[float]) -> float:
    """METEOR from the jar's 23 sufficient statistics (one caption's or a corpus sum)."""
    return statistics.score(np.asarray(stats, dtype=np.float64))


def corpus_stats(per_caption: Sequence[Sequence[float]]) -> np.ndarray:
    """The captions' statistics summed as the jar's EVAL does."""
    return summable(per_caption).sum(axis=0)


def summable(per_caption: Sequence[Sequence[float]]) -> np.ndarray:
    """[captions, 23] rows whose sum over any set of captions is the jar's EVAL
    aggregate of them: a caption matched word for word in one chunk (no
    fragmentation penalty) adds no chunk to the corpus count."""
    rows = np.array(per_caption, dtype=np.float64).reshape(len(per_caption), -1)
    rows[:, CHUNKS] -= statistics.unfragmented_rows(rows)
    return rows


def _checked_inputs(gts: References, res: Candidates) -> tuple[list[str], list[list[str]]]:
    """Candidates and references in the order of ``gts``, or a CaptionError naming the id."""
    if not gts:
        raise ValueError("gts is empty: there is no caption to score")
    for caption_id in res:
        if caption_id not in gts:
            raise CaptionError(caption_id, "has a candidate in res but no references in gts")
    candidates, references = [], []
    for caption_id, refs in gts.items():
        if caption_id not in res:
            raise CaptionError(caption_id, "has references in gts but no candidate in res")
        hypotheses = res[caption_id]
        if isinstance(hypotheses, str) or len(hypotheses) != 1:
            raise CaptionError(
                caption_id, f"res must map it to a list with one candidate, got {hypotheses!r}"
            )
        if isinstance(refs, str) or len(refs) == 0:
            raise CaptionError(caption_id, f"gts must map it to a non-empty list, got {refs!r}")
        for text in (hypotheses[0], *refs):
            if not isinstance(text, str):
                raise CaptionError(caption_id, f"captions must be strings, got {text!r}")
            if "\n" in text or "\r" in text:
                raise CaptionError(caption_id, f"caption {text!r} holds a line break")
        for text in refs:
            if FIELD_SEPARATOR in text:
                raise CaptionError(
                    caption_id,
                    f"reference {text!r} holds {FIELD_SEPARATOR!r}, which pycocoevalcap's "
                    "METEOR would split into two references",
                )
        # pycocoevalcap's own clean-up of the candidate before it reaches the jar.
        candidates.append(hypotheses[0].replace(FIELD_SEPARATOR, "").replace("  ", " "))
        references.append(list(refs))
    return candidates, references


class Meteor:
    """METEOR 1.5 (English, ``-norm``) as pycocoevalcap's ``Meteor``, without Java.

    The first instance in a process reads METEOR's data from the installed
    pycocoevalcap (building the paraphrase index on first use, see
    ``capsim.metrics.meteor.resources``); later instances share it. A call of at least
    2 * PART_MIN_CAPTIONS captions is split into parts scored by up to ``threads``
    threads (default: ``$CAPSIM_METEOR_THREADS``, else the cores, at most
    MAX_THREADS); the statistics are the same either way.

    Args:
        threads: the most threads a call uses.

    Raises:
        MeteorResourceError: METEOR's data files are missing (install
            ``pycocoevalcap==1.2``); the message says what to install.

    Example::

        from capsim.metrics.meteor import Meteor

        corpus, per_caption = Meteor().compute_score(
            {"1": ["a dog runs on the grass", "a brown dog is running"]},
            {"1": ["a dog is running on the grass"]},
        )
    """

    def __init__(self, threads: int | None = None) -> None:
        self._threads = max(1, threads or _default_threads())
        files = resources.locate_files()
        self._data = resources.jar_data(files.jar)
        self._lexicon = _lexicon(files.jar)
        self._index = resources.paraphrase_index(files.paraphrases)

    def method(self) -> str:
        """pycocoevalcap's name of the metric, ``"METEOR"``."""
        return "METEOR"

    def compute_score(self, gts: References, res: Candidates) -> tuple[float, list[float]]:
        """Returns (corpus METEOR, per-caption METEOR in the order of ``gts``).

        Args:
            gts: id -> reference captions (pycocoevalcap tokenizes them first; raw text
                is normalised as the jar's ``-norm`` does).
            res: id -> a one-element list with the candidate.

        Returns:
            The corpus METEOR (the jar's EVAL over the summed statistics) and each
            caption's METEOR against its best reference.

        Raises:
            capsim.errors.CaptionError: an id in only one of ``gts`` and ``res``, not one
                candidate, or a caption that is not a one-line string (the error names the
                id).
        """
        stats = self.statistics(gts, res)
        return meteor_from_stats(corpus_stats(stats)), statistics.scores(stats).tolist()

    def statistics(self, gts: References, res: Candidates) -> np.ndarray:
        """[captions, 23]: each caption's statistics (its best reference's), in the order
        of ``gts``. A call of one part is scored in the caller's thread."""
        batch, bounds = self._parts(gts, res)
        if len(bounds) == 2:
            return statistics.caption_statistics(batch, *bounds)
        return self._scored_in_threads(batch, bounds)()

    def start(self, gts: References, res: Candidates) -> Callable[[], np.ndarray]:
        """``statistics(gts, res)``, begun: the captions are prepared now and scored in
        threads, and calling the returned function (once) waits for them, so that the
        caller can compute something else meanwhile."""
        return self._scored_in_threads(*self._parts(gts, res))

    def _parts(self, gts: References, res: Candidates) -> tuple[matching.Batch, list[int]]:
        """The call's captions prepared, and the bounds of the parts they are scored in."""
        candidates, references = _checked_inputs(gts, res)
        batch = self.prepare(candidates, references)
        parts = max(1, min(self._threads, len(candidates) // PART_MIN_CAPTIONS))
        return batch, np.linspace(0, len(candidates), parts + 1).astype(int).tolist()

    @staticmethod
    def _scored_in_threads(batch: matching.Batch, bounds: list[int]) -> Callable[[], np.ndarray]:
        pool = concurrent.futures.ThreadPoolExecutor(len(bounds) - 1, "capsim-meteor")
        futures = [
            pool.submit(statistics.caption_statistics, batch, first, last)
            for first, last in itertools.pairwise(bounds)
        ]
        pool.shutdown(wait=False)  # returns now; its threads end with their parts
        return lambda: np.concatenate([future.result() for future in futures])

    def prepare(self, candidates: list[str], references: list[list[str]]) -> matching.Batch:
        """Checked and cleaned captions (see _checked_inputs) as the compiled core's arrays:
        each distinct caption normalized once, its words numbered for the process."""
        data, index = self._data, self._index
        texts: dict[str, int] = {}
        for text in (*candidates, *(r for refs in references for r in refs)):
            texts.setdefault(text, len(texts))
        tokens = [token_text(text, data.prefixes, data.numeric_prefixes) for text in texts]
        joined = " ".join(tokens)  # one space after each sentence ends it
        plain = joined.isascii()  # then a character is a byte
        encoded = joined.encode()
        lengths = ((len(t) if plain else len(t.encode())) + 1 for t in tokens)
        ends = np.cumsum(np.fromiter(lengths, np.int64, len(tokens))) - 1
        sentence_at, local_ids, firsts = tables.number_words(np.frombuffer(encoded, np.uint8), ends)
        if plain:
            listed = [joined[start:end] for start, end in firsts.tolist()]
        else:
            listed = [encoded[start:end].decode() for start, end in firsts.tolist()]
        ids = self._lexicon.ids(listed)[local_ids]
        words = self._lexicon.tables()
        span_at, span_start, span_length, span_phrase, reach_at, reach_target, reach_line = (
            tables.phrase_tables(sentence_at, ids, words.hashes, index.arrays)
        )
        reference_at = np.zeros(len(references) + 1, np.int64)
        np.cumsum([len(refs) for refs in references], out=reference_at[1:])
        return matching.Batch(
            sentence_at=sentence_at,
            words=ids,
            stems=words.stems,
            function=words.function,
            synset_at=words.synset_at,
            synsets=words.synsets,
            span_at=span_at,
            span_start=span_start,
            span_length=span_length,
            span_phrase=span_phrase,
            reach_at=reach_at,
            reach_target=reach_target,
            reach_line=reach_line,
            table_lines=index.table_lines,
            max_words=index.max_words,
            candidate=np.array([texts[c] for c in candidates], np.int64),
            reference_at=reference_at,
            reference=np.array([texts[r] for refs in references for r in refs], np.int64),
        )


def _default_threads() -> int:
    """``$CAPSIM_METEOR_THREADS``, else the cores up to MAX_THREADS."""
    value = os.environ.get(THREADS_VARIABLE, "")
    if not value:
        return min(os.cpu_count() or 1, MAX_THREADS)
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"${THREADS_VARIABLE} must be a number of threads >= 1, got {value!r}")
    return int(value)


@functools.cache
def _lexicon(jar: Path) -> lexicon.Lexicon:
    return lexicon.Lexicon(resources.jar_data(jar))
