"""capsim.data.shapes_world: determinism, invariants, grounding-only synonyms, features and gold rules."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from capsim.data import shapes_render
from capsim.data import shapes_world as sw
from capsim.data.shapes_render import COLOURS, POSITIONS, ObjectGroup, render_groups
from capsim.data.shapes_world import eval_sets, lexicon
from capsim.errors import FeatureError

SMALL = sw.ShapesWorldConfig(num_scenes=200, feature_dim=64, seed=1)
FEATURE_CHECK_SCENES = 100
ERROR_TYPES = {
    "correct",
    "dropped_detail",
    "wrong_colour",
    "wrong_shape",
    "wrong_count",
    "wrong_relation",
    "unrelated",
}


@pytest.fixture(scope="module")
def world() -> sw.ShapesWorld:
    return sw.generate_world(SMALL)


def _texts_by_split(world: sw.ShapesWorld) -> dict[str, set[str]]:
    texts: dict[str, set[str]] = defaultdict(set)
    for record in world.captions:
        texts[record.split].add(record.text)
    return texts


def _centred_cosines(a: np.ndarray, b: np.ndarray, mean: np.ndarray) -> np.ndarray:
    a, b = a - mean, b - mean
    return np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


# --- determinism and invariants ---------------------------------------------------------------


def test_same_config_gives_identical_world(world):
    again = sw.generate_world(SMALL)
    assert again.scenes == world.scenes
    np.testing.assert_array_equal(again.images, world.images)
    np.testing.assert_array_equal(again.features, world.features)
    assert again.captions == world.captions
    assert again.graded_pairs == world.graded_pairs
    assert again.synonym_pairs == world.synonym_pairs
    assert again.same_diff_pairs == world.same_diff_pairs
    assert again.candidates == world.candidates

    other = sw.generate_world(dataclasses.replace(SMALL, num_scenes=20, seed=2))
    assert [r.text for r in other.captions[:20]] != [r.text for r in world.captions[:20]]


def test_counts_ids_splits_and_caption_text(world):
    n = SMALL.num_scenes
    assert len(world.scenes) == n == len(world.image_ids)
    assert world.images.shape == (n, SMALL.image_size, SMALL.image_size, 3)
    assert world.images.dtype == np.uint8
    assert world.image_ids == [f"shape-{i:06d}" for i in range(n)]
    assert all(1 <= len(scene.groups) <= 3 for scene in world.scenes)

    assert len(world.captions) == n * SMALL.captions_per_scene
    split_of: dict[str, set[str]] = defaultdict(set)
    texts_of: dict[str, list[str]] = defaultdict(list)
    for record in world.captions:
        image_id, k = record.caption_id.split("#")
        assert image_id == record.image_id and re.fullmatch(r"shape-\d{6}", image_id)
        assert int(k) == len(texts_of[image_id])
        split_of[image_id].add(record.split)
        texts_of[image_id].append(record.text)
        assert record.text and record.text == record.text.strip().lower()
        assert re.fullmatch(r"[a-z]+( [a-z]+)*", record.text), record.text
    assert all(
        len(texts) == len(set(texts)) == SMALL.captions_per_scene for texts in texts_of.values()
    )
    assert all(len(splits) == 1 for splits in split_of.values())
    sizes = [
        sum(splits == {name} for splits in split_of.values()) for name in ("train", "val", "test")
    ]
    assert sizes == [160, 20, 20] == list(SMALL.split_sizes())


def test_features_are_finite_unit_rows(world):
    assert world.features.shape == (SMALL.num_scenes, SMALL.feature_dim)
    assert world.features.dtype == np.float32
    assert np.isfinite(world.features).all()
    np.testing.assert_allclose(np.linalg.norm(world.features, axis=1), 1.0, atol=1e-5)


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="split_fractions"):
        sw.ShapesWorldConfig(split_fractions=(0.5, 0.2, 0.2))
    with pytest.raises(ValueError, match="leaves 1 test scenes"):
        sw.ShapesWorldConfig(num_scenes=10)
    with pytest.raises(ValueError, match="image_size"):
        sw.ShapesWorldConfig(image_size=8)
    with pytest.raises(ValueError, match="captions_per_scene"):
        sw.ShapesWorldConfig(captions_per_scene=1)


# --- grounding-only synonyms --------------------------------------------------------------------


def _register_words(register: str) -> set[str]:
    words = set(lexicon.TEMPLATE_WORDS[register])
    for kind, table in lexicon.LEXICON[register].items():
        for names in table.values():
            for name in names:
                words.update(name.split())
                if kind == "shape":
                    words.update(f"{name}s {name}es".split())
    return words


def test_registers_share_no_word_so_synonyms_never_share_context(world):
    plain_words, terse_words = _register_words(lexicon.PLAIN), _register_words(lexicon.TERSE)
    assert not plain_words & terse_words
    context: dict[str, set[str]] = defaultdict(set)
    for record in world.captions:
        words = record.text.split()
        assert set(words) <= plain_words or set(words) <= terse_words, record.text
        for word in words:
            context[word].update(w for w in words if w != word)
    seen = [
        (plain, terse)
        for plain, terse in sw.GROUNDING_ONLY_SYNONYMS
        if context[plain] and context[terse]
    ]
    assert len(seen) >= 0.9 * len(sw.GROUNDING_ONLY_SYNONYMS)
    for plain, terse in seen:
        assert not context[plain] & context[terse], (plain, terse)
    assert ("red", "scarlet") in sw.GROUNDING_ONLY_SYNONYMS and (
        "square",
        "tile",
    ) in sw.GROUNDING_ONLY_SYNONYMS


def test_grounding_only_synonyms_name_the_same_pixels(world):
    """The mean image feature of captions using "red" is closest to that of "scarlet", etc."""
    mean = world.features.mean(axis=0)
    row = {image_id: k for k, image_id in enumerate(world.image_ids)}

    def direction(word: str) -> np.ndarray:
        rows = sorted({row[r.image_id] for r in world.captions if word in r.text.split()})
        vector = (world.features[rows] - mean).mean(axis=0)
        return vector / np.linalg.norm(vector)

    for kind in ("colour", "size"):
        terse_names = {
            value: names[0] for value, names in lexicon.LEXICON[lexicon.TERSE][kind].items()
        }
        for value, plain_names in lexicon.LEXICON[lexicon.PLAIN][kind].items():
            similarity = {
                v: direction(plain_names[0]) @ direction(t) for v, t in terse_names.items()
            }
            assert max(similarity, key=similarity.get) == value, (plain_names[0], similarity)


# --- features -----------------------------------------------------------------------------------


def test_features_carry_scene_content(world):
    """Re-drawn scenes stay close; changing one group's colour, shape, count or position moves away."""
    scenes, features = world.scenes[:FEATURE_CHECK_SCENES], world.features[:FEATURE_CHECK_SCENES]
    mean = world.features.mean(axis=0)
    redrawn = sw.image_features(
        sw.render_scenes(scenes, SMALL.image_size, np.random.default_rng(9)), 64
    )
    same = _centred_cosines(features, redrawn, mean).mean()
    different = _centred_cosines(features, np.roll(features, 1, axis=0), mean).mean()
    assert same > 0.85 and different < 0.1

    rng = np.random.default_rng(4)
    options = {
        "colour": list(COLOURS),
        "shape": list(shapes_render.SHAPES),
        "count": [1, 2, 3],
        "position": list(POSITIONS),
    }
    for attribute, values in options.items():
        changed = []
        for scene in scenes:
            group = scene.groups[0]
            used = (
                {getattr(g, attribute) for g in scene.groups} if attribute == "position" else set()
            )
            choices = [v for v in values if v != getattr(group, attribute) and v not in used]
            group = dataclasses.replace(group, **{attribute: choices[rng.integers(len(choices))]})
            changed.append(dataclasses.replace(scene, groups=(group, *scene.groups[1:])))
        moved = sw.image_features(
            sw.render_scenes(changed, SMALL.image_size, np.random.default_rng(9)), 64
        )
        assert _centred_cosines(features, moved, mean).mean() < same - 0.01, attribute


def test_image_features_are_per_image_and_seeded(world):
    images = world.images[:6]
    full = sw.image_features(images, dim=32)
    np.testing.assert_allclose(
        sw.image_features(images[3:5], dim=32), full[3:5], rtol=1e-5, atol=1e-6
    )
    assert not np.allclose(sw.image_features(images, dim=32, seed=1), full)


def test_image_features_name_the_bad_row():
    images = np.full((3, 16, 16, 3), 40, dtype=np.uint8)
    images[0, 4:8, 4:8] = 200
    images[2, 2:5, 2:5] = 90
    with pytest.raises(FeatureError, match=r"'row 1'.*no contrast"):
        sw.image_features(images)
    floats = np.where(images > 50, 120.0, 40.0)
    floats[2, 0, 0, 1] = np.nan
    with pytest.raises(FeatureError, match=r"'row 2'.*non-finite"):
        sw.image_features(floats)
    with pytest.raises(ValueError, match=r"\[N, H, W, 3\]"):
        sw.image_features(images[..., :2])


def test_render_puts_colour_in_the_named_cell():
    group = ObjectGroup("red", "square", "large", "left", 1)
    image = render_groups([[group]], 48, np.random.default_rng(0))[0].astype(float)
    red = (image[..., 0] > 150) & (image[..., 1] < 100)
    rows, cols = np.nonzero(red)
    assert red.sum() > 20
    assert (
        rows.min() >= 16 and rows.max() < 32 and cols.max() < 16
    )  # the middle-left cell of a 3x3 grid


# --- evaluation sets ----------------------------------------------------------------------------


def test_eval_sets_come_from_test_scenes(world):
    texts = _texts_by_split(world)
    test_images = {r.image_id for r in world.captions if r.split == "test"}
    assert all({p.text_a, p.text_b} <= texts["test"] for p in world.same_diff_pairs)
    assert all(p.text_a in texts["test"] for p in world.synonym_pairs)
    assert all(p.text_a in texts["test"] or p.text_b in texts["test"] for p in world.graded_pairs)
    assert {c.image_id for c in world.candidates} == test_images


def test_same_diff_pairs(world):
    same = [p for p in world.same_diff_pairs if p.score == 1.0]
    different = [p for p in world.same_diff_pairs if p.score == -1.0]
    assert len(same) + len(different) == len(world.same_diff_pairs)
    assert len(same) == 20 * 10  # every pair of the 5 captions of the 20 test scenes
    assert len(different) == eval_sets.SAME_DIFF_PAIRS
    scene_of = {r.text: r.image_id for r in world.captions if r.split == "test"}
    assert all(scene_of[p.text_a] == scene_of[p.text_b] for p in same)
    assert all(scene_of[p.text_a] != scene_of[p.text_b] for p in different)
    assert len({(p.text_a, p.text_b) for p in world.same_diff_pairs}) == len(world.same_diff_pairs)


def test_graded_pairs_spread_over_the_range(world):
    scores = np.array([p.score for p in world.graded_pairs])
    assert len(scores) == eval_sets.GRADED_PAIRS
    assert scores.min() >= 0.0 and scores.max() <= 5.0
    counts, _ = np.histogram(scores, bins=5, range=(0.0, 5.0))
    assert counts.min() >= 100, counts
    assert all(p.text_a != p.text_b for p in world.graded_pairs)


def _value_of_name() -> dict[str, tuple[str, object, str]]:
    """Colour/shape/size name, and its plural forms, -> (kind, value, register)."""
    return {
        form: (kind, value, register)
        for register, table in lexicon.LEXICON.items()
        for kind in lexicon.SWAPPABLE_KINDS
        for value, names in table[kind].items()
        for name in names
        for form in (name, name + "s", name + "es")
    }


def _swapped_names(a: str, b: str) -> tuple[str, str]:
    """The differing middle of two captions that differ in one name (an article a/an aside)."""
    words_a, words_b = a.split(), b.split()
    start = 0
    while words_a[start] == words_b[start]:
        start += 1
    end = 0
    while words_a[-1 - end] == words_b[-1 - end]:
        end += 1
    middle_a = [w for w in words_a[start : len(words_a) - end] if w not in ("a", "an")]
    middle_b = [w for w in words_b[start : len(words_b) - end] if w not in ("a", "an")]
    return " ".join(middle_a), " ".join(middle_b)


def test_synonym_pairs_swap_one_name(world):
    pairs, name_of = world.synonym_pairs, _value_of_name()
    assert len(pairs) == 2 * 20 * SMALL.captions_per_scene
    for positive, negative in zip(pairs[::2], pairs[1::2], strict=True):
        assert positive.text_a == negative.text_a
        assert positive.score == 5.0 and 0.0 < negative.score < 5.0
        old, new = _swapped_names(positive.text_a, positive.text_b)
        (kind, value, register), (kind_b, value_b, register_b) = name_of[old], name_of[new]
        assert (kind, value) == (kind_b, value_b) and register != register_b
        old, new = _swapped_names(negative.text_a, negative.text_b)
        assert name_of[old][0] == name_of[new][0] and name_of[old][1] != name_of[new][1]


def test_candidates_follow_the_quality_rule(world):
    references = defaultdict(list)
    for record in world.captions:
        references[record.image_id].append(record.text)
    by_image = defaultdict(dict)
    for candidate in world.candidates:
        assert candidate.quality == sw.CANDIDATE_QUALITY[candidate.error_type]
        assert candidate.references == tuple(references[candidate.image_id])
        assert candidate.text not in candidate.references
        assert candidate.error_type not in by_image[candidate.image_id]
        by_image[candidate.image_id][candidate.error_type] = candidate.text
    scene_of = dict(zip(world.image_ids, world.scenes, strict=True))
    for image_id, texts in by_image.items():
        expected = ERROR_TYPES - (
            {"wrong_relation"} if scene_of[image_id].relation is None else set()
        )
        assert set(texts) == expected
    assert {c.error_type for c in world.candidates} == ERROR_TYPES
    assert sw.CANDIDATE_QUALITY == {
        "correct": 4.0,
        "dropped_detail": 3.0,
        "wrong_colour": 2.0,
        "wrong_shape": 2.0,
        "wrong_count": 2.0,
        "wrong_relation": 2.0,
        "unrelated": 1.0,
    }


# --- the gold similarity rule on hand-made descriptions ----------------------------------------


def _mention(
    colour: str,
    shape: str,
    count: int = 1,
    size: str | None = "small",
    position: str | None = "left",
) -> sw.Mention:
    group = ObjectGroup(colour, shape, size or "small", position or "left", count)
    return sw.Mention(group, size is not None, position is not None)


def _describe(*mentions: sw.Mention, relation: str | None = None) -> sw.Description:
    return sw.Description(mentions, sw.Relation(0, relation, 1) if relation else None)


def test_description_similarity_rule():
    red_square, blue_circle = (
        _mention("red", "square"),
        _mention("blue", "circle", 2, "large", "right"),
    )
    similarity = sw.description_similarity
    assert similarity(_describe(red_square), _describe(red_square)) == 5.0
    # Size stated by one caption only: detail = mean(count 1, size 1/2, position 1) = 5/6.
    assert similarity(
        _describe(red_square), _describe(_mention("red", "square", size=None))
    ) == round(5 * (0.6 + 0.4 * 5 / 6), 2)
    assert similarity(_describe(red_square), _describe(_mention("green", "square"))) == 2.5
    assert (
        similarity(_describe(red_square), _describe(_mention("green", "ring", 3, "large", "top")))
        == 0.0
    )
    # A group the other caption leaves out scores 0 and the larger group count divides.
    assert similarity(_describe(red_square, blue_circle), _describe(blue_circle)) == 2.5
    # Group order does not matter; "A left of B" is "B right of A".
    left = _describe(red_square, blue_circle, relation="left of")
    right = sw.Description((blue_circle, red_square), sw.Relation(0, "right of", 1))
    assert similarity(left, right) == 5.0
    assert similarity(left, _describe(red_square, blue_circle, relation="right of")) == 4.0
    assert similarity(left, _describe(red_square, blue_circle)) == round(5 * 1.125 / 1.25, 2)


@pytest.mark.slow
def test_default_world_generates_within_five_seconds_on_one_core():
    """CPU time of the default 2,000-scene world, in a fresh process with single-threaded BLAS."""
    code = (
        "import time; from capsim.data.shapes_world import generate_world; "
        "start = time.process_time(); world = generate_world(); "
        "print(time.process_time() - start, len(world.captions))"
    )
    one_core = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **one_core},
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        check=True,
    )
    seconds, num_captions = result.stdout.split()
    assert float(seconds) < 5.0 and int(num_captions) == 10_000
