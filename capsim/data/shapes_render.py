"""Pixels of the shapes world: what an object group looks like, and a frozen random net over it.

Kept apart from the scene and caption grammar (``shapes_world``) because the
pixels must not depend on the words: the grounding-only synonyms of the world
work only because two names of one attribute value are drawn identically.

Everything is NumPy. Rendering is vectorised over all objects of all scenes
(anti-aliased by supersampling), so 2,000 scenes draw in well under a second;
the feature net is a fixed-seed random conv net evaluated with im2col matmuls.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from capsim.errors import FeatureError

# ---------------------------------------------------------------------------
# The visual vocabulary. Names here are attribute *values*; words live in shapes_world.
# ---------------------------------------------------------------------------

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 190, 60),
    "blue": (50, 80, 235),
    "yellow": (235, 215, 50),
    "purple": (150, 60, 200),
    "orange": (245, 140, 30),
    "white": (235, 235, 235),
    "cyan": (40, 210, 220),
}
SHAPES = ("square", "circle", "triangle", "cross", "ring", "bar")
SIZES = ("small", "large")
# Cells of a 3x3 grid, as (row, column); the corners stay empty so every group
# has a name for where it is and two groups on one row or column have a relation.
POSITIONS: dict[str, tuple[int, int]] = {
    "left": (1, 0),
    "right": (1, 2),
    "top": (0, 1),
    "bottom": (2, 1),
    "center": (1, 1),
}
MAX_COUNT = 3
GRID_CELLS = 3

# Geometry in units of one grid cell (image_size / 3).
SIZE_RADIUS = {"small": 0.20, "large": 0.36}
CROWD_SHRINK = 0.70  # objects of a group of 2 or 3 are drawn smaller so they fit their cell
CROWD_SPREAD = {1: 0.0, 2: 0.28, 3: 0.32}  # distance of each object from the cell centre
CENTRE_JITTER = 0.06
RADIUS_JITTER = 0.10

# Pixel noise: the same description never gives the same pixels.
BACKGROUND_LEVEL = (15.0, 45.0)
BACKGROUND_TINT = 5.0
PIXEL_NOISE = 5.0
COLOUR_JITTER = 12.0
SUPERSAMPLE = 3


@dataclasses.dataclass(frozen=True)
class ObjectGroup:
    """``count`` identical objects of one colour, shape and size in one grid cell."""

    colour: str
    shape: str
    size: str
    position: str
    count: int


def _square(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.maximum(np.abs(u), np.abs(v)) <= 0.85


def _circle(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return u * u + v * v <= 1.0


def _triangle(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    # Apex up (image rows grow downwards): width grows linearly from v=-0.9 to v=0.8.
    return (v >= -0.9) & (v <= 0.8) & (np.abs(u) <= (v + 0.9) * 0.55)


def _cross(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    au, av = np.abs(u), np.abs(v)
    return ((au <= 0.3) & (av <= 0.95)) | ((av <= 0.3) & (au <= 0.95))


def _ring(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    rho2 = u * u + v * v
    return (rho2 <= 1.0) & (rho2 >= 0.25)


def _bar(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (np.abs(u) <= 1.0) & (np.abs(v) <= 0.35)


_SHAPE_MASKS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "square": _square,
    "circle": _circle,
    "triangle": _triangle,
    "cross": _cross,
    "ring": _ring,
    "bar": _bar,
}


def _layout(
    groups_per_image: Sequence[Sequence[ObjectGroup]], image_size: int, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """Flatten groups into per-object arrays: image row, centre x/y, radius, shape index, colour."""
    cell = image_size / GRID_CELLS
    groups = [
        (row, group) for row, image_groups in enumerate(groups_per_image) for group in image_groups
    ]
    counts = np.array([group.count for _, group in groups], dtype=np.int64)
    num_objects = int(counts.sum())
    group_of_object = np.repeat(np.arange(len(groups)), counts)
    slot = np.arange(num_objects) - np.repeat(np.cumsum(counts) - counts, counts)

    image_row = np.array([row for row, _ in groups], dtype=np.int64)[group_of_object]
    cell_rc = np.array([POSITIONS[group.position] for _, group in groups], dtype=np.float64)
    spread = np.array([CROWD_SPREAD[group.count] for _, group in groups])[group_of_object]
    base_radius = np.array(
        [
            SIZE_RADIUS[group.size] * (1.0 if group.count == 1 else CROWD_SHRINK)
            for _, group in groups
        ]
    )[group_of_object]
    shape_index = np.array([SHAPES.index(group.shape) for _, group in groups])[group_of_object]
    rgb = np.array([COLOURS[group.colour] for _, group in groups], dtype=np.float64)[
        group_of_object
    ]

    # Objects of a group sit evenly on a circle around the cell centre, at a random rotation.
    rotation = rng.uniform(0.0, 2.0 * np.pi, size=len(groups))[group_of_object]
    angle = rotation + 2.0 * np.pi * slot / counts[group_of_object]
    jitter = rng.uniform(-CENTRE_JITTER, CENTRE_JITTER, size=(num_objects, 2))
    centre_x = (cell_rc[group_of_object, 1] + 0.5 + spread * np.cos(angle) + jitter[:, 0]) * cell
    centre_y = (cell_rc[group_of_object, 0] + 0.5 + spread * np.sin(angle) + jitter[:, 1]) * cell
    radius = base_radius * rng.uniform(1 - RADIUS_JITTER, 1 + RADIUS_JITTER, num_objects) * cell
    rgb = rgb + rng.uniform(-COLOUR_JITTER, COLOUR_JITTER, size=(num_objects, 3))
    return image_row, centre_x, centre_y, radius, shape_index, np.clip(rgb, 0.0, 255.0)


def render_groups(
    groups_per_image: Sequence[Sequence[ObjectGroup]], image_size: int, rng: np.random.Generator
) -> np.ndarray:
    """Draw one uint8 ``[N, image_size, image_size, 3]`` image per list of groups.

    Each object is an anti-aliased mask (``SUPERSAMPLE``² samples per pixel)
    alpha-blended over a dark, tinted, noisy background. Positions, radii and
    colours are jittered, so two drawings of one description differ in pixels.
    """
    num_images = len(groups_per_image)
    row, centre_x, centre_y, radius, shape_index, rgb = _layout(groups_per_image, image_size, rng)

    level = rng.uniform(*BACKGROUND_LEVEL, size=(num_images, 1, 1, 1)).astype(np.float32)
    tint = rng.uniform(-BACKGROUND_TINT, BACKGROUND_TINT, size=(num_images, 1, 1, 3)).astype(
        np.float32
    )
    patch = math.ceil(2.0 * float(radius.max(initial=1.0))) + 2
    margin = patch // 2 + 1  # room for the part of a patch that pokes out of the image
    # Uniform pixel noise with standard deviation PIXEL_NOISE, drawn straight into the canvas.
    half_width = PIXEL_NOISE * math.sqrt(3.0)
    canvas = rng.random(
        size=(num_images, image_size + 2 * margin, image_size + 2 * margin, 3), dtype=np.float32
    )
    canvas *= 2.0 * half_width
    canvas += level + tint - half_width

    # Coverage of every object on its own patch, computed shape by shape.
    left = np.floor(centre_x - patch / 2).astype(np.int64)
    top = np.floor(centre_y - patch / 2).astype(np.int64)
    sub = ((np.arange(patch * SUPERSAMPLE) + 0.5) / SUPERSAMPLE).astype(np.float32)
    coverage = np.zeros((row.size, patch, patch, 1), np.float32)
    for index, shape in enumerate(SHAPES):
        chosen = np.flatnonzero(shape_index == index)
        if chosen.size == 0:
            continue
        r = radius[chosen, None, None].astype(np.float32)
        u = (
            (left[chosen] - centre_x[chosen]).astype(np.float32)[:, None, None] + sub[None, None, :]
        ) / r
        v = (
            (top[chosen] - centre_y[chosen]).astype(np.float32)[:, None, None] + sub[None, :, None]
        ) / r
        mask = _SHAPE_MASKS[shape](u, v).reshape(
            chosen.size, patch, SUPERSAMPLE, patch, SUPERSAMPLE
        )
        coverage[chosen, :, :, 0] = mask.mean(axis=(2, 4), dtype=np.float32)

    # Paint in layers: layer k holds the k-th object of every image, so no layer touches one
    # image twice and later objects cover earlier ones.
    first_of_image = np.searchsorted(row, row)
    layer = np.arange(row.size) - first_of_image
    offsets = np.arange(patch)
    for k in range(int(layer.max(initial=-1)) + 1):
        chosen = np.flatnonzero(layer == k)
        ys = (top[chosen] + margin)[:, None, None] + offsets[None, :, None]
        xs = (left[chosen] + margin)[:, None, None] + offsets[None, None, :]
        images = row[chosen, None, None]
        window = canvas[images, ys, xs]
        window += coverage[chosen] * (rgb[chosen, None, None, :].astype(np.float32) - window)
        canvas[images, ys, xs] = window
    inner = canvas[:, margin:-margin, margin:-margin]
    return np.clip(np.rint(inner), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------------------
# Frozen random feature net
# ---------------------------------------------------------------------------

# Luminance and two colour-opponent channels (red-green, yellow-blue), as in early vision.
OPPONENT = np.array([[1 / 3, 1 / 3, 1 / 3], [1.0, -1.0, 0.0], [0.5, 0.5, -1.0]], np.float32).T
COLOUR_CHANNELS = 32
SILHOUETTE_CHANNELS = 32
KERNEL = 3
# Distance from the background colour (0..1 RGB scale) at which a pixel counts as fully "object".
SILHOUETTE_CONTRAST = 0.25
# Silhouette filters are zero-mean and unit-norm; only responses above this fire, which makes
# them sparse, local-pattern detectors (corners, holes, arm ends) instead of area meters.
SILHOUETTE_THRESHOLD = 0.45
FEATURE_BATCH = 256


def _conv_relu(maps: np.ndarray, weights: np.ndarray, threshold: float) -> np.ndarray:
    """'Same' 3x3 convolution, minus ``threshold``, then ReLU: [N, H*W, C] via one im2col matmul."""
    n, h, w, _ = maps.shape
    pad = KERNEL // 2
    padded = np.pad(maps, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    shifted = [padded[:, dy : dy + h, dx : dx + w] for dy in range(KERNEL) for dx in range(KERNEL)]
    out = np.concatenate(shifted, axis=-1).reshape(n, h * w, -1) @ weights
    if threshold:
        out -= threshold
    return np.maximum(out, 0.0, out=out)


def _pooling_matrix(height: int, width: int) -> np.ndarray:
    """[10, H*W] averaging weights: the whole image, then each cell of the 3x3 scene grid."""
    rows = np.minimum(np.arange(height) * GRID_CELLS // height, GRID_CELLS - 1)
    cols = np.minimum(np.arange(width) * GRID_CELLS // width, GRID_CELLS - 1)
    cell = (rows[:, None] * GRID_CELLS + cols[None, :]).reshape(-1)
    member = np.vstack(
        [np.ones(height * width), np.arange(GRID_CELLS**2)[:, None] == cell[None, :]]
    )
    return (member / member.sum(axis=1, keepdims=True)).astype(np.float32)


def _grid_pool(responses: np.ndarray, pooling: np.ndarray) -> np.ndarray:
    """Square-rooted means of [N, H*W, C] responses over the regions of ``pooling``: [N, 10 * C]."""
    return np.sqrt(pooling @ responses).reshape(responses.shape[0], -1)


def _unit_rows(block: np.ndarray) -> np.ndarray:
    """Rows scaled to unit norm; an all-zero row (a pathway that saw nothing) stays zero."""
    norms = np.linalg.norm(block, axis=1, keepdims=True)
    return block / np.where(norms > 0.0, norms, 1.0)


def _frozen_weights(dim: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    colour_fan_in = OPPONENT.shape[1] * KERNEL * KERNEL
    colour = rng.normal(size=(colour_fan_in, COLOUR_CHANNELS)) / math.sqrt(colour_fan_in)
    silhouette = rng.normal(size=(KERNEL * KERNEL, SILHOUETTE_CHANNELS))
    silhouette -= silhouette.mean(axis=0)
    silhouette /= np.linalg.norm(silhouette, axis=0)
    pooled = (GRID_CELLS * GRID_CELLS + 1) * (COLOUR_CHANNELS + SILHOUETTE_CHANNELS)
    projection = rng.normal(size=(pooled, dim)) / math.sqrt(pooled)
    return colour.astype(np.float32), silhouette.astype(np.float32), projection.astype(np.float32)


def image_features(images: np.ndarray, dim: int = 256, seed: int = 0) -> np.ndarray:
    """Frozen random-conv-net features, float32 ``[N, dim]``, each row of unit L2 norm.

    ``images`` are RGB on the 0..255 scale (uint8, or floats). The net, whose
    weights are fixed by ``seed`` and never trained, has two parallel pathways
    over the image minus its median colour (its background):

    - colour: luminance + two colour-opponent channels, a random 3x3 conv (32) and ReLU;
    - silhouette: the colour-blind contrast map clipped to [0, 1], a bank of
      zero-mean unit-norm random 3x3 filters (32) with a firing threshold and ReLU.

    Each pathway is mean-pooled over the whole image and over each cell of the
    3x3 scene grid, square-rooted and scaled to unit norm; the two are
    concatenated, projected to ``dim`` by a fixed Gaussian matrix and scaled to
    unit norm. A row depends only on its own image, so any subset gives the
    same rows. Rows are not centred: centre them (or use PCA) before reading
    cosines as similarities.

    Raises:
      ValueError: if ``images`` is not ``[N, H, W, 3]`` with ``H, W >= 3``, or ``dim < 1``.
      FeatureError: naming the row of a non-finite image, or of an image with
        no contrast, whose feature would be the zero vector.
    """
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[-1] != 3 or min(images.shape[1:3]) < GRID_CELLS:
        raise ValueError(
            f"images must be [N, H, W, 3] with H, W >= {GRID_CELLS}, got {images.shape}"
        )
    if dim < 1:
        raise ValueError(f"dim must be positive, got {dim}")
    colour_weights, silhouette_weights, projection = _frozen_weights(dim, seed)
    pooling = _pooling_matrix(*images.shape[1:3])
    features = np.empty((images.shape[0], dim), np.float32)
    for start in range(0, images.shape[0], FEATURE_BATCH):
        batch = images[start : start + FEATURE_BATCH].astype(np.float32) / 255.0
        not_finite = np.flatnonzero(~np.isfinite(batch).all(axis=(1, 2, 3)))
        if not_finite.size:
            raise FeatureError(f"row {start + int(not_finite[0])}", "image has non-finite pixels")
        batch -= np.median(batch, axis=(1, 2), keepdims=True)
        silhouette = np.minimum(
            np.linalg.norm(batch, axis=-1, keepdims=True) / SILHOUETTE_CONTRAST, 1.0
        )
        pathways = (
            _grid_pool(_conv_relu(batch @ OPPONENT, colour_weights, 0.0), pooling),
            _grid_pool(_conv_relu(silhouette, silhouette_weights, SILHOUETTE_THRESHOLD), pooling),
        )
        pooled = np.concatenate([_unit_rows(block) for block in pathways], axis=1)
        features[start : start + batch.shape[0]] = pooled @ projection
    norms = np.linalg.norm(features, axis=1)
    flat = np.flatnonzero(norms == 0.0)
    if flat.size:
        raise FeatureError(
            f"row {int(flat[0])}", "image has no contrast, so its feature is the zero vector"
        )
    return features / norms[:, None]
