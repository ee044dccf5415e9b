"""The evaluation sets, built from test scenes only: graded, synonym and same/different
pairs, and candidate captions with rule-based quality."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from capsim.data.shapes_world.edits import (
    _EDITS,
    CANDIDATE_QUALITY,
    CORRECT,
    UNRELATED,
    _replace_mention,
    _with_error,
)
from capsim.data.shapes_world.grammar import (
    _Caption,
    _name,
    _Piece,
    _text,
    _Word,
    _write_description,
)
from capsim.data.shapes_world.lexicon import (
    LEXICON,
    PLAIN,
    REGISTERS,
    SWAPPABLE_KINDS,
    TERSE,
    _pick,
    _pick_two,
)
from capsim.data.shapes_world.scenes import Scene, _full_description
from capsim.data.shapes_world.similarity import MAX_SIMILARITY, description_similarity


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
