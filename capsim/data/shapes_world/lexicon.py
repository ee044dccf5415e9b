"""The two registers' lexicons: attribute values (shapes_render) to the words captions use.

The registers share no word, so their synonyms meet only through the pixels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import numpy as np

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
