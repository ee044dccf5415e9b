"""Tokenisation, vocabularies and padded encoding shared by every model and metric.

Models want every token (punctuation carries signal for a language model); the
n-gram metrics read pycocoevalcap's PTBTokenizer output instead, which
capsim.metrics.tokenizer reproduces.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from capsim.errors import CaptionError, DataFormatError

PAD = "<pad>"
UNK = "<unk>"
BOS = "<S>"
EOS = "</S>"
SPECIALS = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = range(len(SPECIALS))

VOCAB_FORMAT = "capsim.vocab/1"

# Coarse tokens, tried left to right at each position: clitics that stand alone
# (Flickr8k writes "man 's"), numbers with inner separators ("3.5", "1,000"),
# words joined by hyphens or apostrophes, then punctuation runs and single symbols.
_TOKEN_RE = re.compile(
    r"""
    n't\b | '(?:s|re|ll|ve|m|d)\b
    | \d+(?:[.,:]\d+)+
    | [^\W_]+(?:[-'][^\W_]+)*
    | \.\.\.+ | --+ | `` | ''
    | [^\w\s] | _+
    """,
    re.VERBOSE,
)
# A word that ends in a clitic is split PTB-style: "don't" -> "do n't", "it's" -> "it 's".
_CLITIC_RE = re.compile(r"^(.+?)(n't|'s|'re|'ll|'ve|'m|'d)$")
# PTB splits "cannot" into two words.
_SPLIT_WORDS = {"cannot": ("can", "not")}
# Typographic quotes are folded to ASCII so "it’s" splits like "it's".
_QUOTE_FOLD = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"'})
# Words of letters and digits between single spaces, perhaps a final stop: unless one is
# "cannot", the tokens are the words (and the stop), as _TOKEN_RE finds them. Most captions
# are such; checking is a tenth of the regex's time (issue 60's speed).
_PLAIN_RE = re.compile(r"[a-z0-9]+(?: [a-z0-9]+)*")


def tokenize(text: str) -> list[str]:
    """Lower-cased PTB-like tokens, punctuation kept as tokens.

    Memoised (``TOKENIZE_CACHE`` sentences): a run's dev evaluations tokenize the same
    sentences at every evaluation, and a pack's members at each of theirs; on the
    shapes world that was 40% of a VTFN-BOW member's evaluation time."""
    return list(_tokens(text))


TOKENIZE_CACHE = 1 << 17


@functools.lru_cache(maxsize=TOKENIZE_CACHE)
def _tokens(text: str) -> tuple[str, ...]:
    folded = text.lower() if text.isascii() else text.lower().translate(_QUOTE_FOLD)
    words = folded[:-1] if folded.endswith(".") else folded
    if _PLAIN_RE.fullmatch(words) and "cannot" not in words:  # most captions
        return (*words.split(), ".") if len(words) < len(folded) else tuple(words.split())
    return _matched_tokens(folded)


def _matched_tokens(folded: str) -> tuple[str, ...]:
    """The tokens of a lower-cased, quote-folded text, by _TOKEN_RE and the rewrites."""
    tokens: list[str] = []
    for token in _TOKEN_RE.findall(folded):
        if token in _SPLIT_WORDS:
            tokens.extend(_SPLIT_WORDS[token])
            continue
        clitic = _CLITIC_RE.match(token) if "'" in token else None
        if clitic:
            tokens.extend(clitic.groups())
        elif token.startswith("..."):
            tokens.append("...")
        else:
            tokens.append(token)
    return tuple(tokens)


@dataclasses.dataclass
class Vocab:
    """Token <-> id mapping with the four special tokens at ids 0..3."""

    itos: list[str]
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    stoi: dict[str, int] = dataclasses.field(init=False)
    _sentences: dict[str, tuple[int, ...] | None] = dataclasses.field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        if tuple(self.itos[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {SPECIALS}, got {self.itos[:4]}")
        self.stoi = {token: index for index, token in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("a vocabulary must not list a token twice")

    @classmethod
    def build(
        cls,
        tokenized: Iterable[Sequence[str]],
        min_count: int = 1,
        max_size: int | None = None,
    ) -> Vocab:
        """Most frequent tokens first (ties by token), so ids are reproducible.

        ``max_size`` counts the special tokens.
        """
        counter: collections.Counter[str] = collections.Counter()
        for tokens in tokenized:
            counter.update(tokens)
        for special in SPECIALS:
            counter.pop(special, None)
        kept = sorted(
            (item for item in counter.items() if item[1] >= min_count),
            key=lambda item: (-item[1], item[0]),
        )
        if max_size is not None:
            kept = kept[: max(max_size - len(SPECIALS), 0)]
        return cls(itos=[*SPECIALS, *(token for token, _ in kept)], counts=dict(kept))

    @property
    def pad_id(self) -> int:
        return PAD_ID

    @property
    def unk_id(self) -> int:
        return UNK_ID

    @property
    def bos_id(self) -> int:
        return BOS_ID

    @property
    def eos_id(self) -> int:
        return EOS_ID

    def __len__(self) -> int:
        return len(self.itos)

    def lookup(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens``; out-of-vocabulary tokens map to the unknown id."""
        get = self.stoi.get
        return [get(token, UNK_ID) for token in tokens]

    def sentence_ids(self, sentence: str) -> tuple[int, ...] | None:
        """``<S> w1 .. wn </S>`` ids of a sentence, None when it has no token. Memoised
        (up to TOKENIZE_CACHE sentences): dev evaluations embed the same sentences each time."""
        if sentence in self._sentences:
            return self._sentences[sentence]
        tokens = tokenize(sentence)
        ids = (BOS_ID, *self.lookup(tokens), EOS_ID) if tokens else None
        if len(self._sentences) >= TOKENIZE_CACHE:
            self._sentences.clear()
        self._sentences[sentence] = ids
        return ids

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[int(index)] for index in ids]

    def save(self, path: str | Path) -> None:
        payload = {"format": VOCAB_FORMAT, "tokens": self.itos, "counts": self.counts}
        Path(path).write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        try:
            payload = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError as error:
            raise DataFormatError(path, "vocabulary file does not exist") from error
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DataFormatError(path, f"not a JSON vocabulary file ({error})") from error
        if not isinstance(payload, dict) or payload.get("format") != VOCAB_FORMAT:
            raise DataFormatError(path, f"not a {VOCAB_FORMAT} vocabulary file")
        try:
            return cls(itos=list(payload["tokens"]), counts=dict(payload.get("counts", {})))
        except (KeyError, TypeError, ValueError) as error:
            raise DataFormatError(path, f"bad vocabulary contents ({error})") from error


@dataclasses.dataclass
class EncodedText:
    """A padded batch of token ids; ``mask`` is True on real tokens including BOS/EOS."""

    ids: np.ndarray
    lengths: np.ndarray
    mask: np.ndarray


TOO_LONG_POLICIES = ("error", "truncate")


def encode(
    vocab: Vocab,
    texts: Sequence[str | bytes],
    max_len: int,
    *,
    ids: Sequence[object] | None = None,
    add_bos: bool = True,
    add_eos: bool = True,
    too_long: str = "error",
    allow_all_unknown: bool = False,
) -> EncodedText:
    """Tokenise, look up and pad ``texts`` into ``[N, max_len]`` int32 arrays.

    Bad captions raise CaptionError naming ``ids[i]`` (or the index ``i``), so a
    user can find the offending line in their corpus.
    """
    if too_long not in TOO_LONG_POLICIES:
        raise ValueError(f"too_long must be one of {TOO_LONG_POLICIES}, got {too_long!r}")
    if ids is not None and len(ids) != len(texts):
        raise ValueError(f"got {len(ids)} ids for {len(texts)} texts")
    n_special = int(add_bos) + int(add_eos)
    room = max_len - n_special
    if room < 1:
        raise ValueError(f"max_len={max_len} leaves no room for a token")

    rows: list[list[int]] = []
    for index, text in enumerate(texts):
        caption_id = ids[index] if ids is not None else index
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as error:
                raise CaptionError(caption_id, f"bytes are not valid UTF-8 ({error})") from error
        tokens = tokenize(text)
        if not tokens:
            raise CaptionError(caption_id, "caption is empty or whitespace only")
        token_ids = vocab.lookup(tokens)
        if not allow_all_unknown and all(token_id == UNK_ID for token_id in token_ids):
            raise CaptionError(caption_id, f"every token is out of vocabulary: {tokens[:8]}")
        if len(token_ids) > room:
            if too_long == "error":
                raise CaptionError(
                    caption_id,
                    f"{len(token_ids)} tokens (+{n_special} BOS/EOS) exceed max_len={max_len}",
                )
            token_ids = token_ids[:room]
        rows.append(token_ids)

    lengths = np.fromiter((len(row) + n_special for row in rows), np.int32, len(rows))
    flat = np.fromiter((token_id for row in rows for token_id in row), np.int32)
    mask = np.arange(max_len, dtype=np.int32)[None, :] < lengths[:, None]
    token_mask = mask.copy()
    if add_bos:
        token_mask[:, 0] = False
    if add_eos:
        token_mask[np.arange(len(rows)), lengths - 1] = False
    encoded = np.full((len(rows), max_len), PAD_ID, np.int32)
    encoded[token_mask] = flat
    if add_bos:
        encoded[:, 0] = BOS_ID
    if add_eos:
        encoded[np.arange(len(rows)), lengths - 1] = EOS_ID
    return EncodedText(ids=encoded, lengths=lengths, mask=mask)
