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
"""

from __future__ import annotations

import contextlib
import functools
import gc
import operator
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path

import numpy as np

from capsim.errors import CaptionError
from capsim.eval.meteor import lexicon, matching, resources, workers
from capsim.eval.meteor.normalize import normalize

# METEOR 1.5's English "rank" task (the jar prints them as Parameters/Weights).
ALPHA, BETA, GAMMA, DELTA = 0.85, 0.2, 0.6, 0.75
MODULE_WEIGHTS = (1.0, 0.6, 0.8, 0.6)  # exact, stem, synonym, paraphrase
FIELD_SEPARATOR = "|||"  # METEOR's stdio protocol separator
CHUNKS = 4 + 4 * matching.MODULE_COUNT  # position of the chunk count in the statistics
MAX_PROCESSES = 4  # this one and up to three workers (capsim.eval.meteor.workers)
PROCESSES_VARIABLE = "CAPSIM_METEOR_PROCESSES"
SHARE_MIN_CAPTIONS = 1000  # fewer captions are scored in this process alone

References = Mapping[Hashable, Sequence[str]]
Candidates = Mapping[Hashable, Sequence[str]]


def meteor_from_stats(stats: Sequence[float]) -> float:
    """METEOR from the jar's 23 sufficient statistics (one caption's or a corpus sum)."""
    test_len, ref_len, test_func, ref_func = stats[:4]
    per_module = stats[4 : 4 + 4 * matching.MODULE_COUNT]
    chunks, test_matched, ref_matched = stats[CHUNKS:]
    test_num = ref_num = 0.0
    for weight, k in zip(MODULE_WEIGHTS, range(0, len(per_module), 4), strict=True):
        test_content, ref_content, test_function, ref_function = per_module[k : k + 4]
        test_num += weight * (DELTA * test_content + (1 - DELTA) * test_function)
        ref_num += weight * (DELTA * ref_content + (1 - DELTA) * ref_function)
    test_den = DELTA * (test_len - test_func) + (1 - DELTA) * test_func
    ref_den = DELTA * (ref_len - ref_func) + (1 - DELTA) * ref_func
    precision = test_num / test_den if test_den > 0 else 0.0
    recall = ref_num / ref_den if ref_den > 0 else 0.0
    if precision <= 0 or recall <= 0:
        return 0.0
    fmean = precision * recall / (ALPHA * precision + (1 - ALPHA) * recall)
    mean_matched = (test_matched + ref_matched) / 2
    fragmentation = 0.0 if _unfragmented(stats) else chunks / mean_matched
    return fmean * (1 - GAMMA * fragmentation**BETA)


def corpus_stats(per_caption: Sequence[Sequence[float]]) -> np.ndarray:
    """The captions' statistics summed as the jar's EVAL does."""
    return summable(per_caption).sum(axis=0)


def summable(per_caption: Sequence[Sequence[float]]) -> np.ndarray:
    """[captions, 23] rows whose sum over any set of captions is the jar's EVAL
    aggregate of them: a caption matched word for word in one chunk (no
    fragmentation penalty) adds no chunk to the corpus count."""
    rows = np.array(per_caption, dtype=np.float64).reshape(len(per_caption), -1)
    rows[:, CHUNKS] -= [_unfragmented(s) for s in rows]
    return rows


def _unfragmented(stats: Sequence[float]) -> bool:
    test_len, ref_len = stats[0], stats[1]
    chunks, test_matched, ref_matched = stats[CHUNKS:]
    return test_matched == test_len and ref_matched == ref_len and chunks == 1


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
    """METEOR 1.5 (English, ``-norm``) as pycocoevalcap's ``Meteor``, in pure Python.

    The first instance in a process reads METEOR's data from the installed
    pycocoevalcap (building the paraphrase index on first use, see
    ``capsim.eval.meteor.resources``); later instances share it. A call with at
    least SHARE_MIN_CAPTIONS captions shares them with worker processes, up to
    ``processes`` in all (default: ``$CAPSIM_METEOR_PROCESSES``, else the cores, at
    most MAX_PROCESSES; 1 keeps every caption in this process); the statistics are
    the same either way.
    """

    def __init__(self, processes: int | None = None) -> None:
        self._processes = max(1, processes or _default_processes())
        files = resources.locate_files()
        self._data = resources.jar_data(files.jar)
        self._lexicon = _lexicon(files.jar)
        self._phrases = _phrases(files.paraphrases)

    def method(self) -> str:
        return "METEOR"

    def compute_score(self, gts: References, res: Candidates) -> tuple[float, list[float]]:
        """Returns (corpus METEOR, per-caption METEOR in the order of ``gts``)."""
        stats = self.statistics(gts, res)
        scores = [meteor_from_stats(s) for s in stats]
        return meteor_from_stats(corpus_stats(stats)), scores

    def statistics(self, gts: References, res: Candidates) -> list[tuple[int, ...]]:
        """Each caption's 23 statistics (its best reference's), in the order of ``gts``."""
        return self.start(gts, res)()

    def start(self, gts: References, res: Candidates) -> Callable[[], list[tuple[int, ...]]]:
        """``statistics(gts, res)``, begun: the workers' shares start now, and calling
        the returned function (once) scores this process's share and gathers them, so
        that the caller can compute something else meanwhile."""
        candidates, references = _checked_inputs(gts, res)
        if len(candidates) < SHARE_MIN_CAPTIONS or self._processes < 2:
            return functools.partial(self.statistics_of, candidates, references)
        share = (candidates, references)
        return workers.POOL.start(share, self._processes - 1, lambda s: self.statistics_of(*s))

    def statistics_of(self, candidates: list[str], references: list[list[str]]) -> list[tuple]:
        """``statistics`` of checked and cleaned captions (see _checked_inputs)."""
        with _cyclic_gc_paused():
            texts = {*candidates, *(r for refs in references for r in refs)}
            sentences, reach = self._sentences(texts)
            stats = [
                self._caption_stats(sentences[c], [sentences[r] for r in refs], reach)
                for c, refs in zip(candidates, references, strict=True)
            ]
            del sentences, reach  # freed here, not swept by the collector once it is back
        return stats

    def _sentences(self, texts: set[str]) -> tuple[dict[str, matching.Sentence], dict]:
        """Each distinct caption normalized and prepared for the matchers, once, and the
        paraphrases of their phrases (Phrases.within)."""
        data = self._data
        words = {text: normalize(text, data.prefixes, data.numeric_prefixes) for text in texts}
        spans = self._phrases.spans(list(words.values()))
        reach = self._phrases.within(spans)
        vocabulary = {word for tokens in words.values() for word in tokens}
        synonyms = matching.synonym_words(vocabulary, self._lexicon)
        sentences = {
            text: matching.Sentence.of(tokens, self._lexicon, phrases, reach, synonyms, 1 - DELTA)
            for (text, tokens), phrases in zip(words.items(), spans, strict=True)
        }
        return sentences, reach

    def _caption_stats(
        self, test: matching.Sentence, refs: list[matching.Sentence], reach: dict
    ) -> tuple[int, ...]:
        """The statistics of the best-scoring reference (the first one on a tie).

        The references are aligned in the order of an upper bound of their score,
        and one whose bound, or whose tighter bound once a best exists, cannot beat
        the best so far is not aligned: the same statistics, with far fewer searches.
        """
        found = [matching.candidates(test, ref, reach) for ref in refs]
        bounds = [score_bound(test, ref, f) for ref, f in zip(refs, found, strict=True)]
        best, best_score, best_index = None, -1.0, -1
        for index in sorted(range(len(refs)), key=lambda k: -bounds[k]):
            if bounds[index] < best_score:
                break  # the bounds left are no higher
            if bounds[index] == best_score and index > best_index:
                continue  # at best a tie, lost to an earlier reference
            ref = refs[index]
            if best is not None:  # a tighter bound, worth its cost where it may spare a search
                tight = score_bound(test, ref, found[index], matching.longest_chunk(found[index]))
                if tight < best_score or (tight == best_score and index > best_index):
                    continue
            aligned = matching.align(len(test.words), len(ref.words), found[index])
            stats = matching.statistics(test, ref, aligned)
            score = meteor_from_stats(stats)
            if score > best_score or (score == best_score and index < best_index):
                best, best_score, best_index = stats, score, index
        return best


def _default_processes() -> int:
    """``$CAPSIM_METEOR_PROCESSES``, else the cores up to MAX_PROCESSES."""
    value = os.environ.get(PROCESSES_VARIABLE, "")
    if not value:
        return min(os.cpu_count() or 1, MAX_PROCESSES)
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"${PROCESSES_VARIABLE} must be a number of processes >= 1, got {value!r}")
    return int(value)


def score_bound(
    test: matching.Sentence,
    ref: matching.Sentence,
    found: Sequence[matching.Candidate],
    longest_chunk: float | None = None,
) -> float:
    """An upper bound of the METEOR score of any alignment built from ``found``.

    Every word that some candidate match covers counts as matched, at the best
    weight of the modules that cover it, and the fragmentation penalty is at its
    least: none if every word can be matched in one chunk; otherwise chunks over
    matched words is at least 1 / the longest chunk possible, ``longest_chunk``
    (matching.longest_chunk) or, if not given, the words that can be matched
    (looser, and free). Raised by a relative 1e-9 so that rounding never puts it
    below the score it bounds.
    """
    test_weights, ref_weights = [0.0] * len(test.words), [0.0] * len(ref.words)
    for j, _, i, test_len, ref_len, module in found:
        weight = MODULE_WEIGHTS[module]
        if test_len == ref_len == 1:  # most matches: one word each side
            if test_weights[i] < weight:
                test_weights[i] = weight
            if ref_weights[j] < weight:
                ref_weights[j] = weight
            continue
        for k in range(i, i + test_len):
            test_weights[k] = max(test_weights[k], weight)
        for k in range(j, j + ref_len):
            ref_weights[k] = max(ref_weights[k], weight)
    precision = _weighted_share(test, test_weights)
    recall = _weighted_share(ref, ref_weights)
    if precision <= 0 or recall <= 0:
        return 0.0
    fmean = precision * recall / (ALPHA * precision + (1 - ALPHA) * recall)
    coverable = (sum(map(bool, test_weights)) + sum(map(bool, ref_weights))) / 2
    chunk = coverable if longest_chunk is None else longest_chunk
    if all(test_weights) and all(ref_weights) and chunk == coverable:
        return fmean * (1 + 1e-9)
    return fmean * (1 - GAMMA * (1 / chunk) ** BETA) * (1 + 1e-9)


def _weighted_share(sentence: matching.Sentence, weights: Sequence[float]) -> float:
    """Weighted matched words over weighted words, content words weighing DELTA."""
    if sentence.total_share <= 0:
        return 0.0
    return sum(map(operator.mul, sentence.shares, weights)) / sentence.total_share


@contextlib.contextmanager
def _cyclic_gc_paused():
    """The search allocates millions of short-lived tuples and none in a cycle, so reference
    counting frees them all; the cyclic collector's sweeps of them only cost time (about a
    tenth of a call on the Flickr8k-Expert candidates)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@functools.cache
def _lexicon(jar: Path) -> lexicon.Lexicon:
    return lexicon.Lexicon(resources.jar_data(jar))


@functools.cache
def _phrases(source: Path) -> lexicon.Phrases:
    return lexicon.Phrases(resources.paraphrase_index(source))
