"""A caption's sentences, cut where the PTB tokenizer's own rules say a sentence ends.

I2CE scores a caption of several sentences by aligning them (i2ce_jax.scorer,
capsim.metrics.sentence_alignment); this is the one splitter it uses.
"""

from __future__ import annotations

import functools
import re

from capsim.metrics.tokenizer import is_listed, lex
from capsim.metrics.tokenizer_tables import ABBREVIATIONS, BEFORE_NUMBERS, SENTENCE_STARTERS

# A caption is cut after a word that ends in ".", "!", "?" or an ellipsis when the lexer
# above writes that mark as a token of its own: the tokenizer's rules decide, so "Mr.",
# "St.", "e.g." and "fig. 3" keep their period (ABBREVIATIONS, BEFORE_NUMBERS), "3.5" is
# one number, and an initial before a sentence starter ("... by A. The dog") ends its
# sentence. Two rules are added for sentences, where the jar has no opinion: an ellipsis,
# "!" or "?" ends a sentence only before a capital letter ("a dog... running" and Flickr8k's
# 'an " oh ! " face' stay whole; a period before a lower-case word does end one, as
# captioning models often write lower case), and a
# kept abbreviation other than a title ("etc.", "p.m.", "U.S.A.") ends one before a
# capitalised sentence starter ("... at 5 p.m. The dog").

_CLOSING = "\"'\u2019\u201d)\\]}"
# The end of a word in a sentence mark (and closing quotes or brackets), with the next word.
# Found by its mark, then the word by its last space: a regex that started at each word and
# backtracked through it took a third longer (0.12 s against 0.09 s on 1,000 paragraphs).
_CANDIDATE_END = re.compile(f"[.!?\u2026][{_CLOSING}]*(?=\\s+(\\S+))")
_WORD = re.compile(r"\S+")
_CLOSERS = frozenset(["''", "'", "-rrb-", "-rsb-", "-rcb-"])
TITLES = frozenset(
    ["mr", "mrs", "ms", "messrs", "dr", "drs", "prof", "st", "ste", "mt", "ft", "gen", "gov",
     "capt", "lt", "col", "sgt", "maj", "brig", "cmdr", "insp", "det", "rev", "sen", "sens",
     "rep", "reps", "pres", "hon", "jr", "sr"]
)  # fmt: skip
_PLAIN_END = re.compile(r"([A-Za-z]{2,})\.")
_OPENERS = "\"'\u2018\u201c([{`"


@functools.lru_cache(maxsize=1 << 16)
def _ends_sentence(word: str, following: str | None) -> bool:
    """Whether ``word`` (a whitespace-delimited chunk) closes a sentence before ``following``."""
    plain = _PLAIN_END.fullmatch(word)
    if (
        plain
        and following is not None
        and not is_listed(plain[1], ABBREVIATIONS)
        and plain[1].lower() not in BEFORE_NUMBERS
    ):
        return True  # what the lexer decides for a plain word of two letters or more
    tokens = lex(word if following is None else f"{word}\n{following}")[0]
    while tokens and tokens[-1] in _CLOSERS:
        tokens.pop()
    if not tokens:
        return False
    last = tokens[-1]
    if following is None:
        return True
    next_word = following.lstrip(_OPENERS)
    capital = next_word[:1].isupper()
    if last == ".":
        return True
    if last == "..." or set(last) <= set("!?"):
        return capital
    if last.endswith(".") and len(last) > 1:  # a period the tokenizer keeps on its word
        stem = last.rstrip(".")
        starter = capital and next_word.lower().strip(",;:") in SENTENCE_STARTERS
        return starter and stem not in TITLES
    return False


def _word_start(caption: str, end: int) -> int:
    """Where the word (a run of non-whitespace) that ends at ``end`` starts."""
    start = caption.rfind(" ", 0, end) + 1
    if _WORD.fullmatch(caption, start, end):
        return start
    at = end  # a line break or another kind of space lies between: step back to it
    while not caption[at - 1].isspace():
        at -= 1
    return at


def split_sentences(caption: str) -> list[str]:
    """A caption's sentences, each as written (stripped), in order.

    The PTB tokenizer's rules decide which periods end a sentence (see the comment above
    ``_ends_sentence``): abbreviations, decimals and initials before names stay inside
    their sentence; a missing final stop still closes the last sentence; a caption of one
    sentence, however long, comes back whole, unchanged but for outer whitespace. A piece
    with no letter or digit (a lone "!!!") joins the sentence before it (the first one, the
    sentence after it). An empty or
    whitespace-only caption gives ``[]``.

    Args:
      caption: the text of one caption (line breaks count as spaces).

    Returns:
      The sentences; ``" ".join`` of them equals the caption up to whitespace.
    """
    sentences: list[str] = []
    start = 0
    for candidate in _CANDIDATE_END.finditer(caption):
        end = candidate.end()
        if _ends_sentence(caption[_word_start(caption, end) : end], candidate[1]):
            sentences.append(caption[start:end])
            start = end
    sentences.append(caption[start:])
    kept: list[str] = []
    leading = ""  # marks before the first sentence with a word ("... A dog")
    for piece in (s.strip() for s in sentences):
        if not piece:
            continue
        if not any(c.isalnum() for c in piece):
            if kept:
                kept[-1] = f"{kept[-1]} {piece}"
            else:
                leading = f"{leading} {piece}".strip()
        else:
            kept.append(f"{leading} {piece}".strip())
            leading = ""
    return kept if kept or not leading else [leading]
