"""Scenes (object groups and a relation) and descriptions: what one caption states about a scene."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from capsim.data.shapes_render import (
    COLOURS,
    MAX_COUNT,
    POSITIONS,
    SHAPES,
    SIZES,
    ObjectGroup,
)
from capsim.data.shapes_world.lexicon import _pick

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
