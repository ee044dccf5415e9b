"""Rendering descriptions to caption text in either register."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from capsim.data.shapes_world.lexicon import LEXICON, PLAIN, TERSE, TERSE_RATE, _pick, _plural
from capsim.data.shapes_world.scenes import Description, Mention, Scene, _sample_description


@dataclasses.dataclass(frozen=True)
class _Word:
    """An attribute name inside a caption, kept with its value so it can be swapped later."""

    kind: str
    value: object
    mention: int | None  # index into the description's mentions; None for a relation
    plural: bool
    text: str


_Piece = str | _Word


def _name(
    kind: str,
    value: object,
    register: str,
    rng: np.random.Generator,
    mention: int | None = None,
    plural: bool = False,
) -> _Word:
    text = _pick(LEXICON[register][kind][value], rng)
    return _Word(kind, value, mention, plural, _plural(text) if plural else text)


def _noun_phrase(
    d: Description, index: int, register: str, rng: np.random.Generator
) -> list[_Piece]:
    mention = d.mentions[index]
    group = mention.group
    pieces: list[_Piece] = [_name("count", group.count, register, rng, index)]
    if mention.with_size:
        pieces.append(_name("size", group.size, register, rng, index))
    pieces.append(_name("colour", group.colour, register, rng, index))
    pieces.append(_name("shape", group.shape, register, rng, index, plural=group.count > 1))
    return pieces


def _where(d: Description, index: int, register: str, rng: np.random.Generator) -> list[_Piece]:
    mention = d.mentions[index]
    if not mention.with_position:
        return []
    return [_name("position", mention.group.position, register, rng, index)]


def _located(d: Description, index: int, register: str, rng: np.random.Generator) -> list[_Piece]:
    return _noun_phrase(d, index, register, rng) + _where(d, index, register, rng)


def _joined(phrases: Sequence[list[_Piece]], joiner: str) -> list[_Piece]:
    pieces: list[_Piece] = list(phrases[0])
    for phrase in phrases[1:]:
        pieces += [joiner, *phrase]
    return pieces


def _verb(mention: Mention) -> str:
    return "is" if mention.group.count == 1 else "are"


PLAIN_PREFIXES = ("an image of", "a picture of")
PREFIX_RATE = 0.5


def _plain_groups(d: Description, rng: np.random.Generator) -> list[_Piece]:
    """Plain templates that list groups without a relation."""
    first = d.mentions[0]
    others = [_located(d, i, PLAIN, rng) for i in range(1, len(d.mentions))]
    template = int(rng.random() * (5 if others else 4))
    if template == 3:  # passive: "a red square is shown on the left together with ..."
        shown = [*_noun_phrase(d, 0, PLAIN, rng), _verb(first), "shown", *_where(d, 0, PLAIN, rng)]
        return shown + (["together", "with", *_joined(others, "and")] if others else [])
    listed = _joined([_located(d, 0, PLAIN, rng), *others], "and")
    if template == 0:
        return ["there", _verb(first), *listed]
    if template == 1:
        return [_pick(PLAIN_PREFIXES, rng), *listed]
    if template == 2:
        return ["the", _pick(("picture", "image"), rng), "contains", *listed]
    return [*_located(d, 0, PLAIN, rng), "next", "to", *_joined(others, "and")]


def _relation_core(
    d: Description, register: str, rng: np.random.Generator
) -> tuple[list[_Piece], list[_Piece]]:
    """The subject's noun phrase, and the relation followed by the object's noun phrase."""
    head = _noun_phrase(d, d.relation.subject, register, rng)
    tail = [
        _name("relation", d.relation.relation, register, rng),
        *_noun_phrase(d, d.relation.object, register, rng),
    ]
    return head, tail


def _groups_outside_relation(
    d: Description, register: str, rng: np.random.Generator
) -> list[list[_Piece]]:
    related = (d.relation.subject, d.relation.object)
    return [_located(d, i, register, rng) for i in range(len(d.mentions)) if i not in related]


def _plain_relation(d: Description, rng: np.random.Generator) -> list[_Piece]:
    """Plain templates around "<subject> <relation> <object>", other groups appended with "and"."""
    subject = d.mentions[d.relation.subject]
    head, tail = _relation_core(d, PLAIN, rng)
    extras = _groups_outside_relation(d, PLAIN, rng)
    if extras:
        tail += ["and", *_joined(extras, "and")]
    template = int(rng.random() * 4)
    if template == 0:
        prefix = [_pick(PLAIN_PREFIXES, rng)] if rng.random() < PREFIX_RATE else []
        return [*prefix, *head, *tail]
    if template == 1:
        return ["there", _verb(subject), *head, *tail]
    if template == 2:
        return [*head, _verb(subject), *tail]
    return [*head, "can", "be", "seen", *tail]


def _terse(d: Description, rng: np.random.Generator) -> list[_Piece]:
    """Terse templates: groups joined by "alongside", optionally after "photo showing"."""
    prefix: list[_Piece] = ["photo", "showing"] if rng.random() < PREFIX_RATE else []
    if d.relation is None:
        return prefix + _joined(
            [_located(d, i, TERSE, rng) for i in range(len(d.mentions))], "alongside"
        )
    head, tail = _relation_core(d, TERSE, rng)
    return prefix + _joined([head + tail, *_groups_outside_relation(d, TERSE, rng)], "alongside")


def _render(d: Description, register: str, rng: np.random.Generator) -> list[_Piece]:
    if register == TERSE:
        return _terse(d, rng)
    return _plain_relation(d, rng) if d.relation is not None else _plain_groups(d, rng)


_VOWELS = tuple("aeiou")


def _text(pieces: Sequence[_Piece]) -> str:
    """Join pieces into a caption, writing "an" for the article "a" before a vowel."""
    words = " ".join(p.text if isinstance(p, _Word) else p for p in pieces).split()
    return " ".join(
        "an" if word == "a" and i + 1 < len(words) and words[i + 1].startswith(_VOWELS) else word
        for i, word in enumerate(words)
    )


def _register(rng: np.random.Generator) -> str:
    return TERSE if rng.random() < TERSE_RATE else PLAIN


@dataclasses.dataclass(frozen=True)
class _Caption:
    """A written caption with what it states and how, so evaluation sets can edit it."""

    description: Description
    register: str
    pieces: tuple[_Piece, ...]
    text: str


MAX_RENDER_ATTEMPTS = 200


def _write(
    describe: Callable[[], Description], avoid: set[str], rng: np.random.Generator, what: str
) -> _Caption:
    """Write captions of ``describe()`` in random registers until one's text is not in ``avoid``."""
    for _ in range(MAX_RENDER_ATTEMPTS):
        description, register = describe(), _register(rng)
        pieces = tuple(_render(description, register, rng))
        text = _text(pieces)
        if text not in avoid:
            return _Caption(description, register, pieces, text)
    raise ValueError(f"could not write {what} that differs from its {len(avoid)} other captions")


def _write_description(
    description: Description, avoid: set[str], rng: np.random.Generator, what: str
) -> _Caption:
    """Write ``description`` itself, re-drawing words and template until the text is new."""
    return _write(lambda: description, avoid, rng, what)


def _scene_captions(scene: Scene, count: int, rng: np.random.Generator) -> list[_Caption]:
    captions: list[_Caption] = []
    for _ in range(count):
        texts = {caption.text for caption in captions}
        captions.append(
            _write(lambda: _sample_description(scene, rng), texts, rng, "a new caption")
        )
    return captions
