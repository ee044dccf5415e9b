"""The world: its config, the split of scenes, rendering, features and captions."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from capsim.data.records import CaptionRecord
from capsim.data.shapes_render import (
    image_features,
    render_groups,
)
from capsim.data.shapes_world.eval_sets import (
    Candidate,
    SimilarityPair,
    _candidates,
    _graded_pairs,
    _same_diff_pairs,
    _synonym_pairs,
)
from capsim.data.shapes_world.grammar import _scene_captions
from capsim.data.shapes_world.scenes import Scene, _sample_scene

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
