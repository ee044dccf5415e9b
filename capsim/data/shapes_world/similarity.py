"""Gold similarity in [0, 5] between two descriptions, from what they state."""

from __future__ import annotations

import itertools

from capsim.data.shapes_world.lexicon import _CANONICAL_RELATION
from capsim.data.shapes_world.scenes import Description, Mention

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
