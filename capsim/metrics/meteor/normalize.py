"""METEOR 1.5's ``-norm`` tokenizer, reproduced from the jar's observable output.

The jar tokenizes like the Moses tokenizer (punctuation split off, English
apostrophe and period rules, nonbreaking prefixes), with its own additions:
hyphens between word characters become spaces, acronyms lose their periods
("U.S." -> "us"), and only a fixed set of Latin and Cyrillic letters counts as
word characters: every other character (CJK, Greek, Arabic, emoji, ...) is a
token of its own. Each rule below was checked against the jar on the
Flickr8k and COCO captions and on probes of every BMP code point.
"""

from __future__ import annotations

import re
from collections.abc import Collection

# Characters that the jar keeps inside words (everything else not a space or
# one of . ' , - is split off as a token of its own).
WORD_CHARS = "0-9A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u017e\u0400-\u0527\u1d00-\u1d7f\ua640-\ua66e\ua67e-\ua697"
LETTERS = WORD_CHARS.replace("0-9", "")
# The jar also leaves the vertical tab inside a word.
_KEPT = WORD_CHARS + r" \x0b.',\-"
SPACE_CHARS = "\t\x0c\u00a0\u2000-\u200a\u202f\u205f\u3000"
NUMERIC_ONLY = "#NUMERIC_ONLY#"

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "`": "'"})
_SPACES = re.compile(f"[{SPACE_CHARS}]")
_WORD_HYPHEN = re.compile(f"([{WORD_CHARS}.])-([{WORD_CHARS}])")
_SPECIAL = re.compile(f"([^{_KEPT}])")
_MULTI_DOT = re.compile(r"\.{2,}")
_COMMA_RULES = (
    (re.compile(r"([^0-9]),([^0-9])"), r"\1 , \2"),
    (re.compile(r"([0-9]),([^0-9])"), r"\1 , \2"),
    (re.compile(r"([^0-9]),([0-9])"), r"\1 , \2"),
)
_APOSTROPHE_RULES = (
    (re.compile(f"([^{LETTERS}])'([^{LETTERS}])"), r"\1 ' \2"),
    (re.compile(f"([^{WORD_CHARS}])'([{LETTERS}])"), r"\1 ' \2"),
    (re.compile(f"([{LETTERS}])'([^{LETTERS}])"), r"\1 ' \2"),
    (re.compile(f"([{LETTERS}])'([{LETTERS}])"), r"\1 '\2"),
    (re.compile(r"([0-9])'(s)"), r"\1 '\2"),
)
_DOT_PLACEHOLDER = "\x00"
# Text that no rule below changes: lower-case letters, digits and spaces, as most of
# the PTB tokenizer's output is.
_PLAIN = re.compile("[a-z0-9 ]*")


def parse_prefixes(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """Reads a Moses nonbreaking-prefix file: (prefixes, prefixes only before a number)."""
    always, numeric = set(), set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, tag = line.partition(" ")
        (numeric if tag.strip() == NUMERIC_ONLY else always).add(word)
    return frozenset(always), frozenset(numeric)


def _java_trim(text: str) -> str:
    """Java's String.trim(): strips every character <= U+0020 at both ends."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _periods(words: list[str], prefixes: Collection[str], numeric: Collection[str]) -> list[str]:
    """Splits a word-final period off unless it marks an abbreviation or acronym."""
    out = []
    for position, word in enumerate(words):
        if len(word) < 2 or not word.endswith("."):
            out.append(word)
            continue
        stem = word[:-1]
        following = words[position + 1] if position + 1 < len(words) else ""
        if "." in stem and any(ch.isalpha() for ch in stem):
            out.append(word.replace(".", ""))  # the jar drops an acronym's periods
        elif (
            stem in prefixes
            or following[:1].islower()
            or (stem in numeric and following[:1].isdigit())
        ):
            out.append(word)
        else:
            out.append(stem + " .")
    return out


def normalize(text: str, prefixes: Collection[str], numeric_prefixes: Collection[str]) -> list[str]:
    """Tokens of ``text`` as ``meteor-1.5.jar -norm`` produces them (lower-cased)."""
    if _PLAIN.fullmatch(text):
        return text.split()
    return _normalized(text, prefixes, numeric_prefixes)


def token_text(text: str, prefixes: Collection[str], numeric_prefixes: Collection[str]) -> str:
    """``normalize``'s tokens as one string, split at runs of spaces (no token holds one):
    plain text as it is, so that most captions need no Python work per token."""
    if _PLAIN.fullmatch(text):
        return text
    return " ".join(_normalized(text, prefixes, numeric_prefixes))


def _normalized(
    text: str, prefixes: Collection[str], numeric_prefixes: Collection[str]
) -> list[str]:
    """``normalize`` by every rule, for text that is not plain. A rule whose pattern needs a
    character the text lacks is skipped: it could not match."""
    text = _java_trim(text).translate(_QUOTES).replace("''", '"')
    text = _SPACES.sub(" ", text)
    if "-" in text:
        text = _WORD_HYPHEN.sub(r"\1 \2", text.replace("--", "-"))
    # The en dash is split off first and only then read as a hyphen.
    text = _SPECIAL.sub(r" \1 ", f" {text} ").replace("\u2013", "-")
    if ".." in text:
        text = _MULTI_DOT.sub(lambda m: f" {_DOT_PLACEHOLDER * len(m.group())} ", text)
    rules = (_COMMA_RULES if "," in text else ()) + (_APOSTROPHE_RULES if "'" in text else ())
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    words = text.split(" ")
    if "." in text:
        words = _periods(words, prefixes, numeric_prefixes)
    text = " ".join(words).replace(_DOT_PLACEHOLDER, ".").lower()
    return [token for token in text.split(" ") if token]
