"""The shapes world: a deterministic synthetic image-caption corpus that builds in seconds.

It is the library's embedded default data (DESIGN.md §4): both papers' demos
and the tests train on it, so it needs no download. ``generate_world(config)``
returns scenes, their images and frozen features, five captions per scene and
four evaluation sets, all drawn from ``numpy.random.default_rng(config.seed)``.

**Scenes.** 1-3 object groups, each with a colour (8), shape (6), size (2),
position (5 cells of a 3x3 grid: left, right, top, bottom, center) and count
(1-3 identical objects). No two groups share a cell or a colour+shape. When two
groups share a row or a column, the scene states one relation between them
(left of, right of, above, below). Pixels are drawn by ``shapes_render``.

**Captions** come from a small grammar in two *registers*:

- ``plain``: ordinary English with synonyms ("red"/"crimson", "square"/"box"/
  "block", "two"/"a pair of", "big"/"large"), nine templates ("there are ...",
  "... next to ...", "the picture contains ...", passive "... is shown ...",
  "... can be seen above ...", optional "an image of" prefix);
- ``terse``: a second, complete lexicon with one word per attribute value
  ("scarlet", "tile", "twin", "petite", "westside", "atop") and its own function
  words ("alongside", "photo showing").

Each caption is written in one register (terse with probability 0.2).

**Grounding-only synonyms.** The two registers share *no word*, so no plain
word ever appears in a caption together with a terse word. Every context word of
"red" (at any window size, since contexts never cross captions) is a plain word,
and every context word of "scarlet" is a terse word: the context sets are
disjoint, and a model that learns from text alone (word2vec, a text language
model) has nothing that links the two. Yet "red" and "scarlet" name exactly the
same pixels, because rendering reads only attribute values, never words. An
image-grounded model can therefore learn that they mean the same thing; a
text-only one cannot. ``GROUNDING_ONLY_SYNONYMS`` lists the one-word pairs of
colour, shape and size names; every other terse word (counts, positions,
relations) is grounding-only in the same way. ``synonym_pairs`` measures it.

**Evaluation sets** use test-split scenes only:

- ``graded_pairs``: caption pairs with gold similarity in [0, 5] from
  ``description_similarity`` (what the two captions state), stratified over ten
  bins of the gold range.
- ``synonym_pairs``: a caption against itself with one colour/shape/size name
  swapped for its name in the other register (gold 5), mixed with the same
  caption with that attribute changed to another value (gold by the same rule).
- ``same_diff_pairs``: two captions of one scene (+1) or of two scenes (-1).
- ``candidates``: per test scene, captions with controlled errors and a
  rule-based quality standing in for human judgement (``CANDIDATE_QUALITY``).

docs/shapes_world.md documents every rule with examples.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from capsim.data.records import CaptionRecord
from capsim.data.shapes_render import (
    COLOURS,
    MAX_COUNT,
    POSITIONS,
    SHAPES,
    SIZES,
    ObjectGroup,
    image_features,
    render_groups,
)

__all__ = [
    "CANDIDATE_QUALITY",
    "GROUNDING_ONLY_SYNONYMS",
    "Candidate",
    "Description",
    "Mention",
    "ObjectGroup",
    "Relation",
    "Scene",
    "ShapesWorld",
    "ShapesWorldConfig",
    "SimilarityPair",
    "description_similarity",
    "generate_world",
    "image_features",
    "image_id_of",
    "render_scenes",
]

# ---------------------------------------------------------------------------
# Lexicons. Values are attribute values (shapes_render); words are what captions say.
# ---------------------------------------------------------------------------

PLAIN, TERSE = "plain", "terse"
REGISTERS = (PLAIN, TERSE)
TERSE_RATE = 0.2

# Saying "B right of A" states the same as "A left of B".
_CANONICAL_RELATION = {
    "left of": ("left of", False),
    "right of": ("left of", True),
    "above": ("above", False),
    "below": ("above", True),
}

# kind -> value -> names. Shape names are singular; plurals follow _plural.
LEXICON: dict[str, dict[str, dict[object, tuple[str, ...]]]] = {
    PLAIN: {
        "colour": {
            "red": ("red", "crimson"),
            "green": ("green",),
            "blue": ("blue",),
            "yellow": ("yellow", "golden"),
            "purple": ("purple", "violet"),
            "orange": ("orange",),
            "white": ("white",),
            "cyan": ("cyan", "turquoise"),
        },
        "shape": {
            "square": ("square", "box", "block"),
            "circle": ("circle", "disc", "round shape"),
            "triangle": ("triangle",),
            "cross": ("cross", "plus sign"),
            "ring": ("ring", "hoop"),
            "bar": ("bar", "stick"),
        },
        "size": {"small": ("small", "little", "tiny"), "large": ("large", "big")},
        "count": {1: ("a", "one", "a single"), 2: ("two", "a pair of"), 3: ("three", "a trio of")},
        "position": {
            "left": ("on the left", "at the left side"),
            "right": ("on the right", "at the right side"),
            "top": ("at the top", "near the top"),
            "bottom": ("at the bottom", "near the bottom"),
            "center": ("in the middle", "in the center"),
        },
        "relation": {
            "left of": ("to the left of", "left of"),
            "right of": ("to the right of", "right of"),
            "above": ("above", "over"),
            "below": ("below", "under", "beneath"),
        },
    },
    TERSE: {
        "colour": {
            "red": ("scarlet",),
            "green": ("emerald",),
            "blue": ("cobalt",),
            "yellow": ("lemon",),
            "purple": ("mauve",),
            "orange": ("tangerine",),
            "white": ("snowy",),
            "cyan": ("aqua",),
        },
        "shape": {
            "square": ("tile",),
            "circle": ("orb",),
            "triangle": ("wedge",),
            "cross": ("crosshair",),
            "ring": ("donut",),
            "bar": ("rod",),
        },
        "size": {"small": ("petite",), "large": ("giant",)},
        "count": {1: ("lone",), 2: ("twin",), 3: ("triple",)},
        "position": {
            "left": ("westside",),
            "right": ("eastside",),
            "top": ("northside",),
            "bottom": ("southside",),
            "center": ("midfield",),
        },
        "relation": {
            "left of": ("westward",),
            "right of": ("eastward",),
            "above": ("atop",),
            "below": ("underneath",),
        },
    },
}
# Words the templates add around the attribute names.
TEMPLATE_WORDS = {
    PLAIN: (
        "there",
        "is",
        "are",
        "and",
        "an",
        "image",
        "of",
        "a",
        "picture",
        "shown",
        "together",
        "with",
        "next",
        "to",
        "the",
        "contains",
        "can",
        "be",
        "seen",
    ),
    TERSE: ("alongside", "photo", "showing"),
}
SWAPPABLE_KINDS = ("colour", "shape", "size")


_T = TypeVar("_T")


def _pick(options: Sequence[_T], rng: np.random.Generator) -> _T:
    """One uniform choice; ``rng.random()`` is several times faster than ``rng.integers`` per call."""
    return options[int(rng.random() * len(options))]


def _pick_two(options: Sequence[_T], rng: np.random.Generator) -> tuple[_T, _T]:
    """Two different entries, uniformly."""
    first = int(rng.random() * len(options))
    second = int(rng.random() * (len(options) - 1))
    return options[first], options[second + (second >= first)]


def _plural(noun: str) -> str:
    return noun + ("es" if noun.endswith(("s", "x")) else "s")


GROUNDING_ONLY_SYNONYMS: tuple[tuple[str, str], ...] = tuple(
    (plain_name, terse_name)
    for kind in SWAPPABLE_KINDS
    for value, plain_names in LEXICON[PLAIN][kind].items()
    for plain_name in plain_names
    if " " not in plain_name
    for terse_name in LEXICON[TERSE][kind][value]
)

# ---------------------------------------------------------------------------
# Scenes and what a caption says about them
# ---------------------------------------------------------------------------

GROUP_COUNT_WEIGHTS = (0.25, 0.45, 0.30)  # P(1 group), P(2), P(3)
_CUMULATIVE_GROUP_WEIGHTS = np.cumsum(GROUP_COUNT_WEIGHTS)[:-1]
_COLOUR_NAMES, _POSITION_NAMES = tuple(COLOURS), tuple(POSITIONS)


@dataclasses.dataclass(frozen=True)
class Relation:
    """``subject`` is ``relation`` ``object``; both are indices into the owner's groups or mentions."""

    subject: int
    relation: str
    object: int


@dataclasses.dataclass(frozen=True)
class Scene:
    """The content of one image: its object groups and at most one stated relation."""

    groups: tuple[ObjectGroup, ...]
    relation: Relation | None


@dataclasses.dataclass(frozen=True)
class Mention:
    """One group as a caption states it: colour, shape and count always; size and position if flagged."""

    group: ObjectGroup
    with_size: bool
    with_position: bool


@dataclasses.dataclass(frozen=True)
class Description:
    """Everything one caption states; its ``relation`` indexes ``mentions``."""

    mentions: tuple[Mention, ...]
    relation: Relation | None


def _sample_scene(rng: np.random.Generator) -> Scene:
    num_groups = int(np.searchsorted(_CUMULATIVE_GROUP_WEIGHTS, rng.random(), side="right")) + 1
    positions = [_POSITION_NAMES[k] for k in rng.permutation(len(_POSITION_NAMES))[:num_groups]]
    groups: list[ObjectGroup] = []
    identities: set[tuple[str, str]] = set()
    for position in positions:
        while (
            True
        ):  # distinct colour+shape per scene, so every caption names one group unambiguously
            identity = (_pick(_COLOUR_NAMES, rng), _pick(SHAPES, rng))
            if identity not in identities:
                break
        identities.add(identity)
        count = 1 + int(rng.random() * MAX_COUNT)
        groups.append(ObjectGroup(identity[0], identity[1], _pick(SIZES, rng), position, count))

    aligned = [
        (i, j)
        for i, j in itertools.permutations(range(num_groups), 2)
        if _relation_between(groups[i], groups[j]) is not None
    ]
    relation = None
    if aligned:
        i, j = _pick(aligned, rng)
        relation = Relation(i, _relation_between(groups[i], groups[j]), j)
    return Scene(tuple(groups), relation)


def _relation_between(subject: ObjectGroup, other: ObjectGroup) -> str | None:
    """The relation from the two cells, when they share a row or a column."""
    (row_s, col_s), (row_o, col_o) = POSITIONS[subject.position], POSITIONS[other.position]
    if row_s == row_o:
        return "left of" if col_s < col_o else "right of"
    if col_s == col_o:
        return "above" if row_s < row_o else "below"
    return None


# How often a caption states a relation (when there is one), keeps an optional
# group, and states a group's size or position: real captions drop details.
RELATION_RATE = 0.5
KEEP_GROUP_RATE = 0.75
SIZE_RATE = 0.7
POSITION_RATE = 0.6


def _sample_description(scene: Scene, rng: np.random.Generator) -> Description:
    relation = (
        scene.relation if scene.relation is not None and rng.random() < RELATION_RATE else None
    )
    required = [relation.subject, relation.object] if relation else []
    optional = [i for i in range(len(scene.groups)) if i not in required]
    kept = [i for i in optional if rng.random() < KEEP_GROUP_RATE]
    if not required and not kept:
        kept = [_pick(optional, rng)]
    order = required + [kept[i] for i in rng.permutation(len(kept))]
    mentions = tuple(
        Mention(
            scene.groups[i],
            rng.random() < SIZE_RATE,
            i not in required and rng.random() < POSITION_RATE,
        )
        for i in order
    )
    return Description(mentions, Relation(0, relation.relation, 1) if relation else None)


def _full_description(scene: Scene) -> Description:
    """All groups with size; the relation if the scene has one, positions for the groups outside it."""
    relation = scene.relation
    required = [relation.subject, relation.object] if relation else []
    order = required + [i for i in range(len(scene.groups)) if i not in required]
    mentions = tuple(Mention(scene.groups[i], True, i not in required) for i in order)
    return Description(mentions, Relation(0, relation.relation, 1) if relation else None)


# ---------------------------------------------------------------------------
# Gold similarity between two descriptions
# ---------------------------------------------------------------------------

MAX_SIMILARITY = 5.0
IDENTITY_SHARE = 0.6  # share of a matched group's score that detail agreement cannot take away
RELATION_WEIGHT = 0.25  # weight of the relation beside the groups (weight 1)
HALF_CREDIT = 0.5  # a detail or relation stated by one caption only


def _detail_agreement(a: Mention, b: Mention) -> float:
    scores = [float(a.group.count == b.group.count)]
    for stated_a, stated_b, same in (
        (a.with_size, b.with_size, a.group.size == b.group.size),
        (a.with_position, b.with_position, a.group.position == b.group.position),
    ):
        if stated_a and stated_b:
            scores.append(float(same))
        elif stated_a or stated_b:
            scores.append(HALF_CREDIT)
    return sum(scores) / len(scores)


def _mention_similarity(a: Mention, b: Mention) -> float:
    identity = ((a.group.colour == b.group.colour) + (a.group.shape == b.group.shape)) / 2
    return identity * (IDENTITY_SHARE + (1.0 - IDENTITY_SHARE) * _detail_agreement(a, b))


def _relation_key(description: Description) -> tuple[tuple[str, str], str, tuple[str, str]] | None:
    relation = description.relation
    if relation is None:
        return None
    subject, other = (description.mentions[i].group for i in (relation.subject, relation.object))
    canonical, swap = _CANONICAL_RELATION[relation.relation]
    if swap:
        subject, other = other, subject
    return (subject.colour, subject.shape), canonical, (other.colour, other.shape)


def description_similarity(a: Description, b: Description) -> float:
    """Gold similarity in [0, 5] of two captions from what they state (the rule of docs/shapes_world.md).

    Groups are matched one-to-one to maximise the summed group score, where a
    pair scores ``identity * (0.6 + 0.4 * detail)``: identity is the mean of
    colour-equal and shape-equal; detail averages count agreement and, for size
    and position, 1/0 when both captions state it, 1/2 when only one does.
    Unmatched groups score 0 and the sum is divided by the larger group count.
    The relation weighs 1/4 beside the groups when either caption states one:
    1 if both state the same (up to "A left of B" = "B right of A"), 1/2 if
    only one does, else 0. The result is 5 times that mean, rounded to 0.01.
    """
    if not a.mentions or not b.mentions:
        raise ValueError("a description must mention at least one group")
    short, long = (a, b) if len(a.mentions) <= len(b.mentions) else (b, a)
    best = max(
        sum(
            _mention_similarity(m, long.mentions[j])
            for m, j in zip(short.mentions, chosen, strict=True)
        )
        for chosen in itertools.permutations(range(len(long.mentions)), len(short.mentions))
    )
    score = best / len(long.mentions)
    key_a, key_b = _relation_key(a), _relation_key(b)
    if key_a is not None or key_b is not None:
        agreement = HALF_CREDIT if key_a is None or key_b is None else float(key_a == key_b)
        score = (score + RELATION_WEIGHT * agreement) / (1.0 + RELATION_WEIGHT)
    return round(MAX_SIMILARITY * score, 2)


# ---------------------------------------------------------------------------
# Rendering descriptions to text
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# Controlled errors, shared by the candidates and the graded pairs
# ---------------------------------------------------------------------------

CORRECT = "correct"
DROPPED_DETAIL = "dropped_detail"
WRONG_COLOUR = "wrong_colour"
WRONG_SHAPE = "wrong_shape"
WRONG_COUNT = "wrong_count"
WRONG_RELATION = "wrong_relation"
UNRELATED = "unrelated"
# Stand-in human judgement on the Flickr8k-Expert scale: 4 describes the image,
# 3 almost (a detail is missing), 2 has one wrong attribute, 1 is about another image.
CANDIDATE_QUALITY: dict[str, float] = {
    CORRECT: 4.0,
    DROPPED_DETAIL: 3.0,
    WRONG_COLOUR: 2.0,
    WRONG_SHAPE: 2.0,
    WRONG_COUNT: 2.0,
    WRONG_RELATION: 2.0,
    UNRELATED: 1.0,
}
_WRONG_ATTRIBUTE_VALUES: dict[str, tuple[object, ...]] = {
    WRONG_COLOUR: tuple(COLOURS),
    WRONG_SHAPE: SHAPES,
    WRONG_COUNT: tuple(range(1, MAX_COUNT + 1)),
}
_ATTRIBUTE = {WRONG_COLOUR: "colour", WRONG_SHAPE: "shape", WRONG_COUNT: "count"}
_EDITS = (DROPPED_DETAIL, WRONG_COLOUR, WRONG_SHAPE, WRONG_COUNT, WRONG_RELATION)


def _replace_mention(d: Description, index: int, mention: Mention) -> Description:
    return dataclasses.replace(d, mentions=(*d.mentions[:index], mention, *d.mentions[index + 1 :]))


def _with_wrong_attribute(
    d: Description, error: str, scene: Scene, rng: np.random.Generator
) -> Description:
    """One mention's colour, shape or count changed, never into another group of the scene."""
    index = int(rng.random() * len(d.mentions))
    mention = d.mentions[index]
    attribute = _ATTRIBUTE[error]
    current = getattr(mention.group, attribute)
    choices = [
        dataclasses.replace(mention.group, **{attribute: value})
        for value in _WRONG_ATTRIBUTE_VALUES[error]
        if value != current
    ]
    if attribute != "count":
        taken = {(group.colour, group.shape) for group in scene.groups}
        choices = [group for group in choices if (group.colour, group.shape) not in taken]
    group = _pick(choices, rng)
    return _replace_mention(d, index, dataclasses.replace(mention, group=group))


def _with_dropped_detail(d: Description, rng: np.random.Generator) -> Description:
    """One group left out (preferably one outside the relation), or, for one group, its size."""
    if len(d.mentions) == 1:
        return _replace_mention(d, 0, dataclasses.replace(d.mentions[0], with_size=False))
    related = (d.relation.subject, d.relation.object) if d.relation else ()
    droppable = [i for i in range(len(d.mentions)) if i not in related] or list(
        range(len(d.mentions))
    )
    dropped = _pick(droppable, rng)
    keep = [i for i in range(len(d.mentions)) if i != dropped]
    if d.relation is not None and dropped not in related:
        relation = Relation(
            keep.index(d.relation.subject), d.relation.relation, keep.index(d.relation.object)
        )
        return Description(tuple(d.mentions[i] for i in keep), relation)
    # Without its relation a group would lose its location, so it gets its position back.
    return Description(
        tuple(dataclasses.replace(d.mentions[i], with_position=True) for i in keep), None
    )


def _with_error(
    d: Description, error: str, scene: Scene, rng: np.random.Generator
) -> Description | None:
    """``d`` with one controlled error, or None when the error does not apply (no relation to flip)."""
    if error == DROPPED_DETAIL:
        return _with_dropped_detail(d, rng)
    if error == WRONG_RELATION:
        if d.relation is None:
            return None
        flipped = Relation(d.relation.object, d.relation.relation, d.relation.subject)
        return dataclasses.replace(d, relation=flipped)
    return _with_wrong_attribute(d, error, scene, rng)


# ---------------------------------------------------------------------------
# The world
# ---------------------------------------------------------------------------

MIN_IMAGE_SIZE = 12
MIN_TEST_SCENES = 2  # different-scene pairs and unrelated candidates need two test scenes
SPLITS = ("train", "val", "test")
SPLIT_TOLERANCE = 1e-6


@dataclasses.dataclass(frozen=True)
class ShapesWorldConfig:
    """Size and seed of a shapes world; the same config always gives the same world."""

    num_scenes: int = 2000
    image_size: int = 32
    captions_per_scene: int = 5
    feature_dim: int = 256
    split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.image_size < MIN_IMAGE_SIZE:
            raise ValueError(f"image_size must be at least {MIN_IMAGE_SIZE}, got {self.image_size}")
        if self.captions_per_scene < 2:
            raise ValueError(
                f"captions_per_scene must be at least 2, got {self.captions_per_scene}"
            )
        if self.feature_dim < 1:
            raise ValueError(f"feature_dim must be positive, got {self.feature_dim}")
        fractions = tuple(self.split_fractions)
        if (
            len(fractions) != len(SPLITS)
            or min(fractions) < 0
            or abs(sum(fractions) - 1) > SPLIT_TOLERANCE
        ):
            raise ValueError(
                f"split_fractions must be 3 non-negative numbers summing to 1, got {fractions}"
            )
        if self.split_sizes()[2] < MIN_TEST_SCENES:
            raise ValueError(
                f"num_scenes={self.num_scenes} with split_fractions={fractions} leaves "
                f"{self.split_sizes()[2]} test scenes; the evaluation sets need {MIN_TEST_SCENES}"
            )

    def split_sizes(self) -> tuple[int, int, int]:
        """Scenes in train, val and test: the first two rounded, test takes the rest."""
        train = round(self.split_fractions[0] * self.num_scenes)
        val = min(round(self.split_fractions[1] * self.num_scenes), self.num_scenes - train)
        return train, val, self.num_scenes - train - val


@dataclasses.dataclass(frozen=True)
class SimilarityPair:
    """Two caption texts and their gold similarity (or +1/-1 same/different scene)."""

    text_a: str
    text_b: str
    score: float


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A caption to score against an image's references, with its error type and rule-based quality."""

    image_id: str
    text: str
    error_type: str
    quality: float
    references: tuple[str, ...]


@dataclasses.dataclass
class ShapesWorld:
    """Scenes, pixels, features, captions and evaluation sets; row i of every array is scene i."""

    config: ShapesWorldConfig
    scenes: list[Scene]
    images: np.ndarray
    image_ids: list[str]
    features: np.ndarray
    captions: list[CaptionRecord]
    graded_pairs: list[SimilarityPair]
    synonym_pairs: list[SimilarityPair]
    same_diff_pairs: list[SimilarityPair]
    candidates: list[Candidate]


def render_scenes(scenes: Sequence[Scene], image_size: int, rng: np.random.Generator) -> np.ndarray:
    """uint8 ``[len(scenes), image_size, image_size, 3]``; new draws of ``rng`` give new pixels."""
    return render_groups([scene.groups for scene in scenes], image_size, rng)


def image_id_of(index: int) -> str:
    """``shape-000123`` for scene 123."""
    return f"shape-{index:06d}"


def generate_world(config: ShapesWorldConfig = ShapesWorldConfig()) -> ShapesWorld:
    """Build the whole world from ``config``; equal configs give identical worlds.

    Scenes, pixels, captions, splits and each evaluation set draw from their own
    child stream of ``numpy.random.default_rng(config.seed)``, so changing how one
    part is drawn leaves the others as they were. The feature net's weights do
    not depend on the seed: features of every world come from the same net.
    """
    streams = np.random.default_rng(config.seed).spawn(8)
    (
        scene_rng,
        pixel_rng,
        caption_rng,
        split_rng,
        graded_rng,
        synonym_rng,
        same_diff_rng,
        candidate_rng,
    ) = streams

    scenes = [_sample_scene(scene_rng) for _ in range(config.num_scenes)]
    images = render_scenes(scenes, config.image_size, pixel_rng)
    image_ids = [image_id_of(i) for i in range(config.num_scenes)]
    written = [_scene_captions(scene, config.captions_per_scene, caption_rng) for scene in scenes]

    order = split_rng.permutation(config.num_scenes)
    split_of = np.empty(config.num_scenes, dtype=object)
    bounds = np.cumsum((0, *config.split_sizes()))
    for name, start, stop in zip(SPLITS, bounds[:-1], bounds[1:], strict=True):
        split_of[order[start:stop]] = name
    captions = [
        CaptionRecord(image_ids[i], f"{image_ids[i]}#{k}", caption.text, str(split_of[i]))
        for i in range(config.num_scenes)
        for k, caption in enumerate(written[i])
    ]
    test = [i for i in range(config.num_scenes) if split_of[i] == "test"]
    return ShapesWorld(
        config=config,
        scenes=scenes,
        images=images,
        image_ids=image_ids,
        features=image_features(images, config.feature_dim),
        captions=captions,
        graded_pairs=_graded_pairs(test, scenes, written, graded_rng),
        synonym_pairs=_synonym_pairs(test, written, synonym_rng),
        same_diff_pairs=_same_diff_pairs(test, written, same_diff_rng),
        candidates=_candidates(test, scenes, written, image_ids, candidate_rng),
    )


# ---------------------------------------------------------------------------
# Evaluation sets (test scenes only)
# ---------------------------------------------------------------------------

GRADED_PAIRS = 1000
GRADED_BINS = 10
CROSS_SCENE_POOL = 4  # random cross-scene pairs in the pool, per graded pair wanted
EDITED_POOL = 1  # reference-vs-edited pairs in the pool, per graded pair wanted


def _graded_pairs(
    test: list[int], scenes: list[Scene], written: list[list[_Caption]], rng: np.random.Generator
) -> list[SimilarityPair]:
    """Pairs from a pool of same-scene, cross-scene and reference-vs-edited captions, stratified by gold.

    Same-scene pairs give high gold, random cross-scene pairs low gold and a
    reference against an edited full description (one error from ``_EDITS``)
    the middle; the pool is then sampled evenly over ``GRADED_BINS`` bins of
    [0, 5], filling short bins from the rest.
    """
    pool: dict[tuple[str, str], float] = {}

    def add(a: _Caption, b: _Caption) -> None:
        if a.text != b.text and (b.text, a.text) not in pool:
            pool.setdefault((a.text, b.text), description_similarity(a.description, b.description))

    for i in test:
        for a, b in itertools.combinations(written[i], 2):
            add(a, b)
    for _ in range(CROSS_SCENE_POOL * GRADED_PAIRS):
        i, j = _pick_two(test, rng)
        add(_pick(written[i], rng), _pick(written[j], rng))
    for _ in range(EDITED_POOL * GRADED_PAIRS):
        i = _pick(test, rng)
        edited = _with_error(_full_description(scenes[i]), _pick(_EDITS, rng), scenes[i], rng)
        if edited is not None:
            add(_pick(written[i], rng), _write_description(edited, set(), rng, "an edit"))

    items = list(pool.items())
    quota = -(-GRADED_PAIRS // GRADED_BINS)
    per_bin = [0] * GRADED_BINS
    stratified, spare = [], []
    for k in rng.permutation(len(items)):
        (text_a, text_b), score = items[k]
        gold_bin = min(int(score / MAX_SIMILARITY * GRADED_BINS), GRADED_BINS - 1)
        per_bin[gold_bin] += 1
        (stratified if per_bin[gold_bin] <= quota else spare).append(
            SimilarityPair(text_a, text_b, score)
        )
    return (stratified + spare)[:GRADED_PAIRS]


SYNONYM_PAIRS = 1000  # half swap a name for its grounding-only synonym, half change the value


def _synonym_pairs(
    test: list[int], written: list[list[_Caption]], rng: np.random.Generator
) -> list[SimilarityPair]:
    """Minimal pairs: a reference vs the same words with one colour/shape/size name replaced.

    The positive replaces the name by the other register's name of the same
    value (gold 5: identical content); the negative by a name, in either
    register, of another value (gold from ``description_similarity``). Both
    edits touch one word, so word overlap alone cannot tell them apart.
    """
    bases = [caption for i in test for caption in written[i]]
    pairs: list[SimilarityPair] = []
    for k in rng.permutation(len(bases))[: SYNONYM_PAIRS // 2]:
        base = bases[k]
        slots = [
            n
            for n, p in enumerate(base.pieces)
            if isinstance(p, _Word) and p.kind in SWAPPABLE_KINDS
        ]
        slot = _pick(slots, rng)
        word = base.pieces[slot]
        other_register = TERSE if base.register == PLAIN else PLAIN
        synonym = _name(word.kind, word.value, other_register, rng, word.mention, word.plural)
        pairs.append(
            SimilarityPair(base.text, _text(_swapped(base.pieces, slot, synonym)), MAX_SIMILARITY)
        )

        values = [v for v in LEXICON[PLAIN][word.kind] if v != word.value]
        value = _pick(values, rng)
        changed = _name(word.kind, value, _pick(REGISTERS, rng), rng, word.mention, word.plural)
        mention = base.description.mentions[word.mention]
        group = dataclasses.replace(mention.group, **{word.kind: value})
        description = _replace_mention(
            base.description, word.mention, dataclasses.replace(mention, group=group)
        )
        gold = description_similarity(base.description, description)
        pairs.append(SimilarityPair(base.text, _text(_swapped(base.pieces, slot, changed)), gold))
    return pairs


def _swapped(pieces: tuple[_Piece, ...], slot: int, word: _Word) -> tuple[_Piece, ...]:
    return (*pieces[:slot], word, *pieces[slot + 1 :])


SAME_DIFF_PAIRS = 1000  # of each label
DRAWS_PER_PAIR = 4  # random draws allowed per different-scene pair wanted, for small worlds


def _same_diff_pairs(
    test: list[int], written: list[list[_Caption]], rng: np.random.Generator
) -> list[SimilarityPair]:
    """Distinct pairs: two captions of one test scene (+1), then one caption each of two test scenes (-1).

    Up to ``SAME_DIFF_PAIRS`` of each; a small world with fewer distinct pairs gives fewer.
    """
    same = [(a.text, b.text) for i in test for a, b in itertools.combinations(written[i], 2)]
    chosen = rng.choice(len(same), size=min(SAME_DIFF_PAIRS, len(same)), replace=False)
    different: dict[tuple[str, str], None] = {}
    for _ in range(DRAWS_PER_PAIR * SAME_DIFF_PAIRS):
        if len(different) == SAME_DIFF_PAIRS:
            break
        i, j = _pick_two(test, rng)
        different[_pick(written[i], rng).text, _pick(written[j], rng).text] = None
    return [SimilarityPair(*same[k], 1.0) for k in sorted(chosen)] + [
        SimilarityPair(text_a, text_b, -1.0) for text_a, text_b in different
    ]


def _candidates(
    test: list[int],
    scenes: list[Scene],
    written: list[list[_Caption]],
    image_ids: list[str],
    rng: np.random.Generator,
) -> list[Candidate]:
    """Per test scene: a fresh correct paraphrase, one caption per applicable error, an unrelated caption.

    Every candidate text differs from the scene's references. The unrelated
    caption is a reference of another test scene that shares no colour+shape
    with this one (of any other test scene when none is that different).
    """
    candidates: list[Candidate] = []
    for i in test:
        references = tuple(caption.text for caption in written[i])
        avoid = set(references)
        full = _full_description(scenes[i])

        written_candidates = [
            (CORRECT, _write_description(full, avoid, rng, "a correct paraphrase").text)
        ]
        for error in _EDITS:
            edited = _with_error(full, error, scenes[i], rng)
            if edited is not None:
                written_candidates.append(
                    (error, _write_description(edited, avoid, rng, f"a {error} caption").text)
                )
        identities = {(g.colour, g.shape) for g in scenes[i].groups}
        others = [j for j in test if j != i]
        disjoint = [
            j for j in others if not identities & {(g.colour, g.shape) for g in scenes[j].groups}
        ]
        unrelated = [
            caption.text
            for j in disjoint or others
            for caption in written[j]
            if caption.text not in avoid
        ]
        written_candidates.append((UNRELATED, _pick(unrelated, rng)))
        candidates += [
            Candidate(image_ids[i], text, error_type, CANDIDATE_QUALITY[error_type], references)
            for error_type, text in written_candidates
        ]
    return candidates
