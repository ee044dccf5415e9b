"""Controlled errors (wrong colour, shape, count or relation; dropped detail) and their quality."""

from __future__ import annotations

import dataclasses

import numpy as np

from capsim.data.shapes_render import (
    COLOURS,
    MAX_COUNT,
    SHAPES,
)
from capsim.data.shapes_world.lexicon import _pick
from capsim.data.shapes_world.scenes import Description, Mention, Relation, Scene

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
