"""Word-level evidence between two sentences (issue 69): one wrong word must show.

A sentence vector pools ten or twenty words, so swapping one ("shirt" -> "skirt") barely
moves it, and a word outside the vocabulary does not move it at all. Inside each pair of
sentences that a caption metric compares, this aligns their *words*, as BERTScore does
with a transformer's token states, here with a model's own word vectors:

- **word similarity**: 1 for two words of the same surface form (the same Snowball stem,
  so "earring" meets "earrings" and a novel object meets itself even outside the
  vocabulary); otherwise, for two words the vocabulary knows, their vectors' cosine
  clipped at 0 and raised to ``power`` (sharpened: a related word is not the same word);
  otherwise (a word outside the vocabulary against another word) the Dice overlap of
  their character trigrams, sharpened alike ("handgun" is nearer "gun" than "bag"); and 0 for two
  different words of one closed class of contraries (``CONTRARIES``: counts, colours),
  whose vectors are close (two/three 0.93 in ``base``) though one excludes the other;
- **precision**: over the candidate sentence's words, each one's best similarity among
  the reference sentence's words, weighted by the word's IDF; **recall** the other way;
- **F**: their F-beta (capsim.metrics.sentence_alignment.f_score).

The IDF is the model's own corpus's (the vocabulary's counts), so a caption's score never
depends on the other captions of a call; a word outside the vocabulary gets the IDF of a
word seen once. Punctuation is not a word. Everything is NumPy on the host: a few
[pairs, words, words] products per call.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence

import numpy as np
import scipy.sparse
import snowballstemmer

from capsim import text
from capsim.metrics.sentence_alignment import f_score

_HAS_WORD_CHARACTER = re.compile(r"\w")
# Sentence pairs per NumPy product: [block, T, U] similarities stay a few MB.
PAIR_BLOCK = 2048
_STEM = snowballstemmer.stemmer("english").stemWord
# Closed classes whose members exclude each other: a count or a colour swapped for another.
CONTRARIES = (
    ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
     "twelve"),
    ("red", "blue", "green", "yellow", "black", "white", "brown", "pink", "purple", "gray",
     "orange"),
)  # fmt: skip


_CLASS_OF = {word: k for k, members in enumerate(CONTRARIES) for word in members}


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A word's Snowball stem (memoised: a call meets the same words many times)."""
    return _STEM(word)


def words_of(sentence: str) -> list[str]:
    """The lower-cased words of a sentence (the model tokenizer's tokens, less punctuation)."""
    return [t for t in text.tokenize(sentence) if _HAS_WORD_CHARACTER.search(t)]


@dataclasses.dataclass(frozen=True)
class WordEvidence:
    """How word evidence enters a sentence pair's similarity: ``(1 - weight) * cosine +
    weight * word F``, the word similarities sharpened by ``power``, F-beta by ``beta``."""

    weight: float
    power: float
    beta: float
    contraries: bool = True
    spelling: bool = True  # unknown words partly match by character trigrams

    def __post_init__(self) -> None:
        if not 0 <= self.weight <= 1:
            raise ValueError(f"word evidence weight must be in [0, 1], got {self.weight}")
        if self.power <= 0 or self.beta < 0:
            raise ValueError(f"word power must be > 0 and beta >= 0, got {self.power}, {self.beta}")


@dataclasses.dataclass(frozen=True)
class WordVectors:
    """A model's words as word alignment reads them: unit vectors and corpus IDF by vocab id."""

    vocab: text.Vocab
    unit: np.ndarray  # [V + 1, D] float32, unit rows; the last, zero, is the padding word's
    idf: np.ndarray  # [V] float64, log((N + 1) / (count + 1)) over the vocabulary's counts
    unseen_idf: float  # a word outside the vocabulary: as if seen once
    stems: tuple[str, ...]  # each vocabulary word's stem, computed once

    @classmethod
    def of(cls, vocab: text.Vocab, embedding: np.ndarray) -> WordVectors:
        """From a vocabulary (with its training counts) and its [V, D] word-vector table."""
        table = np.asarray(embedding, np.float32)
        if table.ndim != 2 or table.shape[0] != len(vocab):
            raise ValueError(
                f"word vectors of shape {table.shape} do not match a vocabulary of {len(vocab)}"
            )
        norms = np.linalg.norm(table, axis=1, keepdims=True)
        counts = np.array([vocab.counts.get(t, 0) for t in vocab.itos], np.float64)
        total = counts.sum() + 1.0
        padded = np.concatenate([table / np.maximum(norms, 1e-12), np.zeros_like(table[:1])])
        return cls(
            vocab,
            padded,
            np.log(total / (counts + 1.0)),
            float(np.log(total / 2.0)),
            tuple(stem(word) for word in vocab.itos),
        )


@dataclasses.dataclass
class SentenceWords:
    """The words of a call's sentences: per sentence its word indices into the call's words.

    ``rows`` [N, T] index ``vocab_ids``/``stems``/``idf``; each distinct word of the call is
    one entry, and the last entry is the padding word (a zero vector, no stem, no weight), so
    padding needs no mask: it scores 0 against every word.
    """

    rows: np.ndarray
    lengths: np.ndarray
    vocab_ids: np.ndarray  # -1 outside the vocabulary
    stems: np.ndarray  # the stem's index: equal stems, the same word
    idf: np.ndarray
    classes: np.ndarray  # the word's class of contraries (-1: none)
    # Character-trigram Dice of each pair of (unknown, any) words that share a trigram, both
    # orders: pair codes ``a * words + b``, sorted, and their values.
    spelled: tuple[np.ndarray, np.ndarray]

    @classmethod
    def of(cls, sentences: Sequence[str], vectors: WordVectors) -> SentenceWords:
        """The words of ``sentences``: each distinct token looked at once, the rest arrays."""
        tokens = [text.tokenize(sentence) for sentence in sentences]
        index: dict[str, int] = {}  # a word's index; punctuation gets -1
        words: list[str] = []
        for token in dict.fromkeys(t for sentence in tokens for t in sentence):
            is_word = _HAS_WORD_CHARACTER.search(token) is not None
            index[token] = len(words) if is_word else -1
            if is_word:
                words.append(token)
        flat = np.array([index[t] for sentence in tokens for t in sentence], np.int64)
        counts = np.array([len(sentence) for sentence in tokens], np.int64)
        of_sentence = np.repeat(np.arange(len(tokens)), counts)[flat >= 0]
        flat = flat[flat >= 0]
        lengths = np.bincount(of_sentence, minlength=len(tokens)).astype(np.int64)
        starts = np.cumsum(lengths) - lengths
        pad = len(words)
        rows = np.full((len(tokens), max(1, int(lengths.max(initial=0)))), pad, np.int64)
        rows[of_sentence, np.arange(flat.size) - starts[of_sentence]] = flat
        vocab_ids = np.array([vectors.vocab.stoi.get(w, -1) for w in words], np.int64)
        stems: dict[str, int] = {}
        known = vocab_ids.tolist()
        stem_of = [
            vectors.stems[i] if i >= 0 else stem(w) for w, i in zip(words, known, strict=True)
        ]
        idf = np.where(vocab_ids >= 0, vectors.idf[np.maximum(vocab_ids, 0)], vectors.unseen_idf)
        return cls(
            rows,
            lengths,
            np.append(vocab_ids, len(vectors.vocab)),  # the padding word: the zero row
            np.append([stems.setdefault(x, len(stems)) for x in stem_of], -1).astype(np.int64),
            np.append(idf, 0.0),
            np.append([_CLASS_OF.get(w, -1) for w in words], -1).astype(np.int64),
            _spelling_overlaps(words, vocab_ids < 0, pad + 1),
        )

    def spelling(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Character-trigram Dice of words ``a`` and ``b`` (index arrays), where one is unknown."""
        codes, values = self.spelled
        wanted = a * len(self.idf) + b
        at = np.minimum(np.searchsorted(codes, wanted), max(codes.size - 1, 0))
        found = codes[at] == wanted if codes.size else np.zeros(wanted.shape, bool)
        return np.where(found, values[at] if codes.size else 0.0, 0.0)


def _trigrams(word: str) -> set[str]:
    padded = f"#{word}#"
    return {padded[i : i + 3] for i in range(len(padded) - 2)}


def _spelling_overlaps(
    words: list[str], unknown: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Pair codes (``a * count + b``) and trigram Dice of every (unknown word, word) pair
    sharing a trigram."""
    empty = (np.zeros(0, np.int64), np.zeros(0))
    if not unknown.any():
        return empty
    grams: dict[str, int] = {}
    cols, rows = [], []
    for i, word in enumerate(words):
        for gram in _trigrams(word):
            rows.append(i)
            cols.append(grams.setdefault(gram, len(grams)))
    table = scipy.sparse.csr_matrix(
        (np.ones(len(rows)), (rows, cols)), shape=(len(words), len(grams))
    )
    sizes = np.asarray(table.sum(axis=1)).ravel()
    shared = (table[np.flatnonzero(unknown)] @ table.T).tocoo()
    a = np.flatnonzero(unknown)[shared.row]
    b = shared.col
    dice = 2.0 * shared.data / (sizes[a] + sizes[b])
    codes = np.concatenate([a * count + b, b * count + a])
    values = np.concatenate([dice, dice])
    codes, first = np.unique(codes, return_index=True)
    return codes, values[first]


def _similarities(
    words: SentenceWords,
    vectors: WordVectors,
    a: np.ndarray,
    b: np.ndarray,
    evidence: WordEvidence,
) -> np.ndarray:
    """Word similarities [..., T, U] of words ``a`` [..., T] against words ``b`` [..., U].

    float32, written in place: a call of 300 paragraphs compares about 7 million word
    pairs, so each pass over them counts."""
    va, vb = words.vocab_ids[a], words.vocab_ids[b]
    unit_b = np.swapaxes(vectors.unit[np.maximum(vb, 0)], -1, -2)
    sims = np.matmul(vectors.unit[np.maximum(va, 0)], unit_b)  # cosines
    np.maximum(sims, 0.0, out=sims)
    _sharpen(sims, evidence.power)
    if (va < 0).any() or (vb < 0).any():  # a word the vocabulary lacks: no cosine
        at = np.nonzero((va < 0)[..., :, None] | (vb < 0)[..., None, :])
        row, col = (*at[:-2], at[-2]), (*at[:-2], at[-1])
        spelled = words.spelling(a[row], b[col]) if evidence.spelling else 0.0
        sims[at] = np.power(spelled, evidence.power)
    ca, cb = words.classes[a], words.classes[b]
    if evidence.contraries and (ca >= 0).any() and (cb >= 0).any():
        sims[(ca >= 0)[..., :, None] & (ca[..., :, None] == cb[..., None, :])] = 0.0
    sims[words.stems[a][..., :, None] == words.stems[b][..., None, :]] = 1.0
    return sims


def _block_precision_recall(
    words: SentenceWords,
    vectors: WordVectors,
    cand: np.ndarray,
    ref: np.ndarray,
    evidence: WordEvidence,
) -> tuple[np.ndarray, np.ndarray]:
    """Word precision and recall of sentence pairs (``cand[i]``, ``ref[i]``), all with words.
    (A [words, words] table made once a call and gathered from was slower: 1.6 s against
    0.7 s for the Flickr8k-Expert call.)"""
    t, u = int(words.lengths[cand].max()), int(words.lengths[ref].max())
    a, b = words.rows[cand, :t], words.rows[ref, :u]  # [B, T], [B, U] word indices
    sims = _similarities(words, vectors, a, b, evidence)
    wa, wb = words.idf[a], words.idf[b]  # the padding word weighs 0
    precision = (wa * sims.max(axis=2)).sum(axis=1) / wa.sum(axis=1)
    recall = (wb * sims.max(axis=1)).sum(axis=1) / wb.sum(axis=1)
    return precision, recall


def _sharpen(sims: np.ndarray, power: float) -> None:
    """``sims ** power`` in place; by squaring when the power is one of 2 (4 products for
    the default 16, a third of a general power's time)."""
    if power >= 1 and float(power).is_integer() and int(power) & (int(power) - 1) == 0:
        for _ in range(int(power).bit_length() - 1):
            sims *= sims
    else:
        np.power(sims, power, out=sims)


def word_scores(
    words: SentenceWords,
    vectors: WordVectors,
    cand: np.ndarray,
    ref: np.ndarray,
    evidence: WordEvidence,
) -> np.ndarray:
    """Word-level F of sentence pairs: candidate sentence ``cand[i]`` against reference
    sentence ``ref[i]`` (rows of ``words``); NaN where either sentence has no word.

    Args:
      words: the call's sentences' words.
      vectors: the model's word vectors and IDF.
      cand: [P] candidate sentence rows.
      ref: [P] reference sentence rows.
      evidence: the sharpening, the contraries and F's beta.

    Returns:
      [P] float64 F scores in [0, 1], or NaN.
    """
    cand, ref = np.asarray(cand, np.int64), np.asarray(ref, np.int64)
    out = np.full(cand.shape, np.nan)
    both = np.flatnonzero((words.lengths[cand] > 0) & (words.lengths[ref] > 0))
    # Pairs of like lengths share a block, so padding stays small.
    both = both[np.lexsort((words.lengths[ref[both]], words.lengths[cand[both]]))]
    for start in range(0, both.size, PAIR_BLOCK):
        at = both[start : start + PAIR_BLOCK]
        precision, recall = _block_precision_recall(words, vectors, cand[at], ref[at], evidence)
        out[at] = f_score(precision, recall, evidence.beta)
    return out


def with_word_evidence(
    sims: np.ndarray,
    cand: np.ndarray,
    ref: np.ndarray,
    words: SentenceWords,
    vectors: WordVectors,
    evidence: WordEvidence,
) -> np.ndarray:
    """Sentence-pair similarities with the pairs' word evidence mixed in.

    Args:
      sims: [...] cosine of each candidate sentence with each reference sentence.
      cand: the candidate sentence rows of ``words``, broadcast to ``sims``' shape (-1: none).
      ref: the reference sentence rows, broadcast likewise (-1: none).
      words: the call's sentences' words.
      vectors: the model's word vectors and IDF.
      evidence: the mix.

    Returns:
      float64 [...]: ``(1 - weight) * sims + weight * F`` where both sentences have a word,
      ``sims`` elsewhere (padding included).
    """
    out = np.array(sims, np.float64)
    cand, ref = (np.broadcast_to(x, out.shape) for x in (cand, ref))
    real = (cand >= 0) & (ref >= 0)
    count = len(words.lengths)
    pairs, inverse = np.unique(cand[real] * count + ref[real], return_inverse=True)
    f = word_scores(words, vectors, pairs // count, pairs % count, evidence)[inverse.ravel()]
    mixed = (1.0 - evidence.weight) * out[real] + evidence.weight * f
    out[real] = np.where(np.isnan(f), out[real], mixed)
    return out
