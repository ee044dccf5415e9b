"""Stanford's PTBTokenizer as pycocoevalcap runs it, in Python.

pycocoevalcap writes every caption of a call on its own line of one file,
runs CoreNLP 3.4.1's ``PTBTokenizer -preserveLines -lowerCase`` on it and
drops the tokens in its PUNCTUATIONS list; BLEU, ROUGE-L and CIDEr read what
is left. This module reproduces that tokenizer's behaviour, derived from
probes of the jar (tests/test_ptb.py and bench/agreement/ptb_agreement.py run both on
generated strings and on real captions), not from its source.

The lexer reads a line left to right; at each position every rule is tried
and the longest match wins, the earlier rule on a tie. A rule may look at
trailing context, which counts towards the match's length but is read again
as the next token: ``dog.,`` keeps its period before a comma, ``fig. 3``
before a number, and an initial (``A.``) loses its period when a sentence
starter such as ``The`` follows, even on the next line, so a caption's
tokens can depend on the caption after it. No token spans two lines, so each
line is lexed alone with what it reads of the next (``_ahead``), and plain
captions take a shortcut; tests/test_ptb.py checks both against the lexer run
over the whole file. Tokens are written as the jar
writes them (brackets as ``-lrb-``, quotes as ``` `` ``` and ``''``, dashes
as ``--``) and lower-cased.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Hashable, Mapping, Sequence

from capsim.errors import CaptionError
from capsim.metrics.tokenizer_tables import (
    ABBREVIATIONS,
    ASSIMILATIONS,
    BEFORE_NUMBERS,
    CHARACTERS,
    DELETED,
    LD,
    LETTER,
    LMD,
    PERIOD_BEFORE_LETTER,
    QUOTES,
    SENTENCE_STARTERS,
    D,
    L,
)

# pycocoevalcap's PUNCTUATIONS. It lists the bracket tokens in upper case, so the
# lower-cased ``-lrb-`` and friends that the jar writes with -lowerCase stay.
DROPPED = frozenset(
    ["''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-",
     "--", "...", ";"]
)  # fmt: skip
# Line breaks that would split a caption into two lines of pycocoevalcap's file (it
# replaces only "\n" by a space), putting every later caption on the wrong id.
LINE_BREAKS = re.compile("[\r\u2028\u2029\u0085\x0b\x0c]")

SPACE_CHARACTERS = " \t\u00a0" + "".join(map(chr, range(0x2000, 0x200B))) + "\u3000"
SPACE = f"(?:[{SPACE_CHARACTERS}]|&nbsp;)"
APOS = "(?:['\u0092\u2019]|&apos;)"
APOS_ANY = (
    "(?:['\u0092\u2019`\u0091\u2018\u201b]|&apos;)"  # what may stand for an apostrophe in a word
)
PARENTHESES = str.maketrans({c: CHARACTERS[c] for c in "()"})
_SPACES = re.compile(f"{SPACE}+")
_LETTER = re.compile(L)
_SGML = (
    r"<(?:[!?][^>\r\n]*|/?[A-Za-z][A-Za-z0-9:.-]*(?:[ ]+[A-Za-z][A-Za-z0-9:.-]*"
    r"(?:[ ]*=[ ]*(?:'[^'\r\n]*'|\"[^\"\r\n]*\"|[A-Za-z0-9][A-Za-z0-9:.-]*))?)*[ ]*/?)>"
)
_STARTER_AHEAD = re.compile(
    rf"(?:{SPACE}|\n)+(?P<word>[A-Z]{L}*)(?=\s|$)|(?:{SPACE}|\n)+{_SGML}(?=\s|$)"
)


def _period_word(match: re.Match) -> str | None:
    """A word and its period, where the jar keeps the period; else no match."""
    word, context = match["word"], match["context"] or ""
    before_number = context[-1:].isdigit()
    if _LETTER.fullmatch(context):  # a longer word may follow: only some periods hold
        return match["token"] if is_listed(word, PERIOD_BEFORE_LETTER) else None
    if is_listed(word, ABBREVIATIONS) or context in (",", ";", ":"):
        return match["token"]
    if word.lower() in BEFORE_NUMBERS and before_number:
        return match["token"]
    if len(word) == 1 and word.isascii() and word.isalpha():
        ahead = _STARTER_AHEAD.match(match.string, match.end("token"))
        if ahead and (ahead["word"] is None or ahead["word"].lower() in SENTENCE_STARTERS):
            return None  # the initial ends a sentence: its period stands alone
        return match["token"]
    return None


def is_listed(word: str, words: frozenset[str]) -> bool:
    """In ``words`` as written, or in mixed case ("cOS") of a listed lower-case word."""
    return word in words or (not word.islower() and word.lower() in words)


ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'"}


class Raw(str):
    """A token written as read, bar lower case (URLs and e-mail keep soft hyphens)."""


def _raw(match: re.Match) -> Raw:
    return Raw(match[0])


def _spaces_joined(match: re.Match) -> str:
    """A token that spans spaces; the jar writes them as no-break spaces."""
    return match[0].replace(" ", "\xa0")


def _brackets_named(match: re.Match) -> str:
    """A smiley or telephone number, its parentheses written as -LRB- and -RRB-."""
    return _spaces_joined(match).translate(PARENTHESES)


_UNIT = rf"(?:[dol]{APOS_ANY}(?={LD}))?{LD}+(?:_{LD}+)*"
_THING = rf"{_UNIT}(?:-{_UNIT})*"  # well-known, o'neill, snake_case
_HTHING = rf"{LD}[A-Za-z0-9.,\u00ad]*(?:-(?:[A-Za-z0-9\u00ad]+|[A-Za-z](?:\.[A-Za-z])+\.))+"
_WORD = rf"{L}{LMD}*(?:[.!?]{L}{LMD}*)*"
# (pattern, rewrite, case-insensitive). A pattern's ``token`` group, when it has one,
# is the token and the rest is trailing context; a rewrite returns the token's text,
# or None where the rule does not apply.
_RULES = [
    (rf"(?P<token>(?P<word>(?:[Pp][Hh]|[Ee][Dd])\.[Dd]|{_THING})\.)"
     rf"(?P<context>(?:{SPACE}|\n)?{D}|[,;:]|[^\s])?", _period_word, False),
    (rf"(?P<token>(?:{_WORD}|{_HTHING})\.)(?P<context>[,;:])", None, False),
    (r"[A-Za-z](?:\.[A-Za-z])+\.?", None, False),  # acronyms: u.s., a.m., e.g.
    (_THING, None, True),
    (_WORD, None, True),
    (_HTHING, None, True),  # 6.0-magnitude, u.s.-led
    (rf"(?P<token>[A-Za-z\u00ad]*[A-MO-Za-mo-z])(?P<context>n{APOS_ANY}t)", None, True),
    (rf"n{APOS_ANY}t", None, True),
    (rf"(?P<token>{_THING})(?P<context>{APOS}(?:[msd]|re|ve|ll))", None, True),
    (r"'(?:[msd]|re|ve|ll)(?![A-Za-z])|(?:[\u0092\u2019]|&apos;)(?:[msd]|re|ve|ll)", None, True),
    (rf"{APOS}n{APOS}|{APOS}n(?={SPACE}|\n|$)", None, True),
    (rf"[ldj]{APOS}|y{APOS}(?={L})", None, True),
    (rf"{APOS}(?:em|[2-9]0s|till?|cause)|(?:dunkin|somethin|ol){APOS}", None, True),
    (rf"{APOS}{D}{D}(?={SPACE}|\n|$)", None, False),  # '15
    (rf"{LETTER}+[aeiouyAEIOUY]{APOS_ANY}[aeiouA-Z]{LETTER}*", None, False),
    (rf"[A-HJ-XZn]{APOS_ANY}{LETTER}{{2,}}", None, False),
    (rf"[-+]?{D}+", None, False),
    (rf"[-+]?{D}*(?:[.:,\u00ad\u066b\u066c]{D}+)+", None, False),
    (rf"{D}{{1,4}}(?:\\?/|\u2044){D}{{1,4}}", None, False),  # fractions
    (rf"{D}{{1,4}}[- \u00a0]{D}{{1,4}}(?:\\?/|\u2044){D}{{1,4}}", _spaces_joined, False),
    (rf"(?:\({D}{{2,3}}\)[ \u00a0]?|(?:\+\+?)?(?:{D}{{2,4}}[- \u00a0])?{D}{{2,4}}[- \u00a0])"
     rf"{D}{{3,4}}[- \u00a0]?{D}{{3,5}}", _brackets_named, False),  # telephone numbers
    (rf"{D}{{1,2}}[-/]{D}{{1,2}}[-/]{D}{{2,4}}", None, False),  # dates
    (r"[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\?/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2}", None,
     False),  # his/her
    (r"[A-Z]+(?:(?:[+&]|&amp;)[A-Z]+)+", lambda m: m[0].replace("&amp;", "&"), False),
    (r"[cf]#|c\+\+", None, True),
    (r"https?://[^ \t\n\f\r\"<>|()]*[^ \t\n\f\r\"<>|.!?(){},-]", _raw, True),
    (r"(?:www\.(?:[^ \t\n\f\r\"<>|.!?(){},]+\.)+[a-zA-Z]{2,4}"
     r"|(?:[^ \t\n\f\r\"`'<>|.!?(){}\x2c-\x5f$]+\.)+(?:com|net|org|edu))"
     r"(?:/[^ \t\n\f\r\"<>|()]*[^ \t\n\f\r\"<>|.!?(){},-])?", _raw, False),
    (r"[a-zA-Z0-9][^ \t\n\f\r\"<>|(){}\u00a0]*@(?:[^ \t\n\f\r\"<>|(){}.\u00a0]+\.)*"
     r"[^ \t\n\f\r\"<>|(){}.\u00a0]+", _raw, False),
    (r"@[a-zA-Z_][a-zA-Z_0-9]*", None, False),
    (rf"#{L}+", None, False),
    (_SGML, _spaces_joined, False),  # SGML tags
    (r"[<>]?[:;=][-o*']?[()DPdpO\\{@|\[\]](?![A-Za-z0-9])", _brackets_named, False),  # smileys
    (r"\^_\^", None, False),
    (r"-(?:LRB|RRB|LSB|RSB|LCB|RCB)-", None, True),
    (r"[A-Z]*\$", None, False),
    (r"&(?:amp|lt|gt|quot|apos);", lambda m: ENTITIES[m[0].lower()], True),
    (r"&#\d+;", None, False),
    (r"\.\.\.+", lambda m: "...", False),
    (r"--+", lambda m: "--" if len(m[0]) <= 4 else m[0], False),
    (r"``|''|>>|<<", None, False),
    (f"`?[{QUOTES}]+`?", lambda m: "".join(CHARACTERS.get(c, c) for c in m[0]), False),
    (r"[!?]+|\*+|#+|@+|_+", None, False),
    (rf"(?!{DELETED})[^\s]", None, False),
]  # fmt: skip
RULES = [
    (re.compile(pattern, re.IGNORECASE if caseless else 0), rewrite)
    for pattern, rewrite, caseless in _RULES
]
# Most tokens are plain words before a space: no rule can read further.
_PLAIN_WORD = re.compile(rf"{L}+(?=[ \n]|$)")


def lex(text: str) -> list[list[str]]:
    """The jar's tokens of every line of ``text``, DROPPED punctuation kept (the sentence
    splitter, capsim.metrics.sentences, reads where a sentence mark stands alone)."""
    lines: list[list[str]] = [[]]
    tokens = lines[0]
    position, end = 0, len(text)
    while position < end:
        if text[position] == "\n":
            tokens = []
            lines.append(tokens)
            position += 1
            continue
        spaces = _SPACES.match(text, position)
        if spaces:
            position = spaces.end()
            continue
        plain = _PLAIN_WORD.match(text, position)
        if plain:
            tokens.extend(_written(plain[0]))
            position = plain.end()
            continue
        best, best_length, best_text = None, 0, ""
        for pattern, rewrite in RULES:
            match = pattern.match(text, position)
            if match is None or match.end() - position <= best_length:
                continue
            token = match["token"] if "token" in pattern.groupindex else match[0]
            if rewrite is not None:
                token = rewrite(match)
                if token is None:
                    continue
            best, best_length, best_text = match, match.end() - position, token
        if best is None:  # an untokenizable character
            position += 1
            continue
        position = best.end("token") if "token" in best.re.groupindex else best.end()
        tokens.extend(_written(best_text))
    return lines


_CLITIC = re.compile(rf"{APOS_ANY}([msd]|re|ve|ll)|n{APOS_ANY}t")


def _written(token: str) -> list[str] | tuple[str, ...]:
    """How the jar writes a token, lower-cased."""
    if len(token) == 1:
        return [CHARACTERS.get(token, token.lower())]
    if isinstance(token, Raw):
        return [token.lower()]
    lowered = token.lower().replace("\xad", "")
    if lowered in ASSIMILATIONS:
        return ASSIMILATIONS[lowered]
    clitic = _CLITIC.fullmatch(lowered)
    if clitic:  # written with a plain apostrophe: 's, n't
        return [f"'{clitic[1]}" if clitic[1] else "n't"]
    return [lowered]


# Most captions are ASCII words (perhaps hyphenated, perhaps with a comma), numbers
# before a word, and lone punctuation: their tokens are the words, lower-cased, unless
# the last word keeps a period written against it (an abbreviation, an initial).
_SIMPLE = re.compile(
    r"(?: *(?:[A-Za-z]+(?:-[A-Za-z]+)*,?|[,;:!?.]|[0-9]+(?! +[-+(0-9]))(?= |$))*"
    r"(?: *(?P<last>[A-Za-z]+(?:-[A-Za-z]+)*)\.)? *"
)
_PUNCTUATION_TO_SPACE = str.maketrans(",;:!?.", "      ")
_FIRST_WORD = re.compile(f"(?:{SPACE})*[^ ]*")


def _ahead(lines: Sequence[str], number: int) -> str:
    """What the lexer reads past the end of line ``number``: nothing, unless the line ends
    in a period against a word (an initial before a sentence starter, or "fig." before a
    number on the next line); then the line break, any blank lines and the next line's
    first word (its whole text if it holds "<", where a tag with spaces may follow)."""
    line = lines[number].rstrip(SPACE_CHARACTERS)
    while line.endswith("&nbsp;"):
        line = line[:-6].rstrip(SPACE_CHARACTERS)
    if not line.endswith(".") or line[-2:-1].isspace():
        return ""
    ahead = []
    for following in (lines[k] for k in range(number + 1, len(lines))):
        if not following or _SPACES.fullmatch(following):
            ahead.append(following)
            continue
        ahead.append(following if "<" in following else _FIRST_WORD.match(following)[0])
        break
    return "\n" + "\n".join(ahead)


@functools.lru_cache(maxsize=1 << 16)
def _line_tokens(line: str, ahead: str) -> tuple[str, ...]:
    """One line's tokens after pycocoevalcap's filter; ``ahead`` as _ahead gives it.
    A line holds no token of another, so each line is lexed alone (and once per process)."""
    simple = _SIMPLE.fullmatch(line)
    if simple and not (
        (last := simple["last"])
        and (len(last) == 1 or is_listed(last, ABBREVIATIONS) or last.lower() in BEFORE_NUMBERS)
    ):
        words = line.lower().translate(_PUNCTUATION_TO_SPACE).split()
        if ASSIMILATIONS.keys().isdisjoint(words):
            return tuple(words)
        return tuple(t for word in words for t in ASSIMILATIONS.get(word, (word,)))
    return tuple(t for t in lex(line + ahead)[0] if t not in DROPPED)


def tokenize_lines(lines: Sequence[str]) -> list[list[str]]:
    """Each line's tokens after pycocoevalcap's filter, the lines read as one file."""
    for number, line in enumerate(lines):
        if "\n" in line or LINE_BREAKS.search(line):
            raise CaptionError(f"line {number}", f"caption {line!r} holds a line break")
    return [list(_line_tokens(line, _ahead(lines, n))) for n, line in enumerate(lines)]


def ptb_tokenize(captions: Mapping[Hashable, Sequence[str]]) -> dict[Hashable, list[str]]:
    """``{id: [caption, ...]}`` -> ``{id: [tokens joined by spaces, ...]}``, as pycocoevalcap's
    PTBTokenizer gives them for the same dict: one line per caption in the dict's order
    (a caption's line feed becomes a space), so a caption sees the one after it."""
    ids, lines = [], []
    for key, texts in captions.items():
        for text in texts:
            text = text.replace("\n", " ")
            if LINE_BREAKS.search(text):
                raise CaptionError(key, f"caption {text!r} holds a line break")
            ids.append(key)
            lines.append(text)
    tokenized: dict[Hashable, list[str]] = {key: [] for key in captions}
    for key, tokens in zip(ids, tokenize_lines(lines), strict=True):
        tokenized[key].append(" ".join(tokens))
    return tokenized


class PTBTokenizer:
    """pycocoevalcap's ``PTBTokenizer`` without Java: the same dicts in and out."""

    def tokenize(
        self, captions_for_image: Mapping[Hashable, Sequence[Mapping[str, str]]]
    ) -> dict[Hashable, list[str]]:
        """``{id: [{"caption": text}, ...]}`` -> ``{id: [tokens joined by spaces, ...]}``."""
        return ptb_tokenize(
            {key: [c["caption"] for c in captions] for key, captions in captions_for_image.items()}
        )
