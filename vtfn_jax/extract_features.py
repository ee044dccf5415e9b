"""Frozen InceptionV3 image features for VTFN, resumable, written as a FeatureStore.

    python -m vtfn_jax.extract_features --images DIR --out DIR [--batch_size 32]
        [--weights imagenet|none|PATH] [--image_size 299] [--ids filename|stem|coco|flickr]
        [--skip_bad]
    python -m vtfn_jax.extract_features --tfds TFDS_DATA_DIR [--tfds_splits train,restval]
        --out DIR ...

``--tfds`` reads the images of a prepared TFDS ``coco_captions`` (ArrayRecord,
no TensorFlow) from the same records as ``sources=coco_tfds`` reads their
captions, keyed by the same COCO ids.

Keras 3 InceptionV3 runs on the JAX backend with ``include_top=False,
pooling="avg"``, giving 2048-d vectors. Images are center-cropped to a square and
resized to 299x299, the network's native size; the VTFN paper says 300x300, which
InceptionV3 would only pool to the same 2048-d vector from a slightly larger map.
``weights="imagenet"`` downloads the ImageNet weights at the user's site.

Features go to ``--out/shards/`` every ``shard_every`` batches, so an interrupted
run resumes and skips the images already done; at the end they are consolidated
into ``features.npy`` + ``ids.json`` + ``meta.json`` (see
:class:`vtfn_jax.features.FeatureStore`) and the shards are removed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from capsim.data.tfds_coco import TRAINING_SPLITS
from capsim.errors import CapsimError, DataFormatError, FeatureError
from capsim.progress import Progress
from vtfn_jax.feature_shards import SHARDS_DIR, ShardWriter, check_run
from vtfn_jax.features import IDS_FILE, FeatureStore
from vtfn_jax.images import ID_STYLES, Images, folder_images, load_image, tfds_images

logger = logging.getLogger(__name__)

DEFAULT_IMAGE_SIZE = 299
DEFAULT_BATCH_SIZE = 32
DEFAULT_SHARD_EVERY = 8  # batches per shard: at most this much work is redone after a crash
DECODE_WORKERS = 4
PROGRESS_EVERY_S = 10.0
SKIPPED_FILE = "skipped_images.json"
RGB_CHANNELS = 3

BatchFn = Callable[[np.ndarray], np.ndarray]


def _import_keras():
    """Imports Keras on the JAX backend; the backend is fixed at Keras' first import."""
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "jax"
    import keras

    if keras.backend.backend() != "jax":
        raise RuntimeError(
            f"Keras was already imported with the {keras.backend.backend()!r} backend; "
            "import vtfn_jax.extract_features before keras, or set KERAS_BACKEND=jax"
        )
    return keras


def build_inception_v3(weights: str | None = "imagenet", image_size: int = DEFAULT_IMAGE_SIZE):
    """InceptionV3 without its classifier, average-pooled to 2048-d."""
    keras = _import_keras()
    return keras.applications.InceptionV3(
        include_top=False,
        weights=weights,
        pooling="avg",
        input_shape=(image_size, image_size, RGB_CHANNELS),
    )


def _as_batch_fn(model) -> BatchFn:
    """A Keras model runs through predict_on_batch (jit-compiled once); any other callable as is."""
    if hasattr(model, "predict_on_batch"):
        return lambda batch: np.asarray(model.predict_on_batch(batch))
    return lambda batch: np.asarray(model(batch))


def extract_features(
    images: str | Path | Images,
    out_dir: str | Path,
    *,
    weights: str | None = "imagenet",
    batch_size: int = DEFAULT_BATCH_SIZE,
    image_size: int = DEFAULT_IMAGE_SIZE,
    shard_every: int = DEFAULT_SHARD_EVERY,
    model: object | None = None,
    id_style: str = "filename",
    skip_bad: bool = False,
) -> FeatureStore:
    """Computes (or resumes computing) features of every image of ``images``.

    Args:
      images: a folder of image files (ids by ``id_style``), or an :class:`Images`
        such as :func:`vtfn_jax.images.tfds_images`.
      weights: "imagenet", "none"/None (random init, for tests) or a weights file.
      shard_every: batches per shard written to ``out_dir/shards``.
      model: replaces InceptionV3, e.g. a tiny Keras model in tests; a Keras
        model or any callable mapping [B, H, W, 3] preprocessed pixels to [B, D].
      id_style: how file names become image ids, see :func:`vtfn_jax.images.image_id_for`
        (ignored when ``images`` is an Images, which carries its own).
      skip_bad: report unreadable images (logged, listed in skipped_images.json)
        and go on, instead of stopping at the first one.

    Returns:
      The consolidated store, also saved as features.npy + ids.json + meta.json.
    """
    if batch_size < 1 or shard_every < 1:
        raise ValueError(
            f"batch_size and shard_every must be positive, got {batch_size}, {shard_every}"
        )
    weights = None if weights in (None, "none") else weights
    if not isinstance(images, Images):
        images = folder_images(images, id_style)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    description = (
        f"Keras InceptionV3 (weights={weights}, avg-pooled, {image_size}x{image_size} input)"
        if model is None
        else f"custom model {getattr(model, 'name', type(model).__name__)}"
    )
    check_run(
        out_dir, {"model": description, "image_size": image_size, "id_style": images.id_style}
    )
    done: dict[str, np.ndarray] = {}
    if (out_dir / IDS_FILE).is_file():
        previous = FeatureStore.load(out_dir)
        done.update(zip(previous.ids, previous.matrix, strict=True))
    shards = ShardWriter(out_dir / SHARDS_DIR, done)
    shards.read_all()
    todo = [(image_id, ref) for image_id, ref in images.items if image_id not in done]
    total = len(images.items)
    logger.info(
        "%s: %d images, %d already done, %d to do",
        images.where,
        total,
        total - len(todo),
        len(todo),
    )

    def make_model() -> object:
        return model if model is not None else build_inception_v3(weights, image_size)

    skipped = []
    if todo:
        progress = Progress(
            total,
            first=total - len(todo),
            unit="images",
            item="images",
            prefix="extract_features: ",
            min_interval_s=PROGRESS_EVERY_S,
        )
        skipped = _run_batches(
            images,
            todo,
            shards,
            make_model,
            batch_size,
            image_size,
            shard_every,
            skip_bad,
            progress,
        )
    skipped_path = out_dir / SKIPPED_FILE
    if skipped:
        skipped_path.write_text(json.dumps(skipped, indent=2), encoding="utf-8")
        logger.warning("%d unreadable images skipped, listed in %s", len(skipped), skipped_path)
    else:
        skipped_path.unlink(missing_ok=True)
    if not done:
        raise DataFormatError(images.where, "no image could be read")
    listed = [image_id for image_id, _ in images.items if image_id in done]
    listed_set = set(listed)
    order = listed + [image_id for image_id in done if image_id not in listed_set]
    store = FeatureStore.from_arrays(
        order, np.stack([done[image_id] for image_id in order]), source=description
    )
    store.save(out_dir)
    shards.remove()
    return store


def _run_batches(
    images: Images,
    todo: list[tuple[str, object]],
    shards: ShardWriter,
    make_model: Callable[[], object],
    batch_size: int,
    image_size: int,
    shard_every: int,
    skip_bad: bool,
    progress: Progress,
) -> list[str]:
    """Runs the model over ``todo`` in batches, shard by shard; returns the unreadable files.

    Whatever was computed is flushed to a shard even when the run stops with an
    error or Ctrl-C, so a rerun resumes after the last finished batch. Files are
    read and decoded by ``DECODE_WORKERS`` threads while the model runs.
    """
    keras = _import_keras()
    batch_fn: BatchFn | None = None
    skipped: list[str] = []

    def load(item: tuple[str, object]) -> np.ndarray | None:
        try:
            return load_image(images.read(item[1]), image_size, images.describe(item[1]))
        except DataFormatError as error:
            if not skip_bad:
                raise
            logger.warning("skipping unreadable image: %s", error)
            return None

    try:
        with ThreadPoolExecutor(max_workers=DECODE_WORKERS) as pool:
            for batch_number, start in enumerate(range(0, len(todo), batch_size), start=1):
                batch_items = todo[start : start + batch_size]
                pixels = list(pool.map(load, batch_items))
                readable = [
                    (item, image)
                    for item, image in zip(batch_items, pixels, strict=True)
                    if image is not None
                ]
                skipped += [
                    images.describe(item[1])
                    for item, image in zip(batch_items, pixels, strict=True)
                    if image is None
                ]
                if readable:
                    batch_fn = batch_fn or _as_batch_fn(make_model())
                    # Padding to a fixed batch keeps one compiled shape for the last, short batch.
                    batch = np.zeros(
                        (batch_size, image_size, image_size, RGB_CHANNELS), dtype=np.float32
                    )
                    batch[: len(readable)] = np.stack([image for _, image in readable])
                    features = batch_fn(keras.applications.inception_v3.preprocess_input(batch))[
                        : len(readable)
                    ]
                    bad_rows = np.flatnonzero(~np.all(np.isfinite(features), axis=1))
                    if bad_rows.size:
                        image_id, ref = readable[int(bad_rows[0])][0]
                        raise FeatureError(
                            image_id, f"model gave non-finite features for {images.describe(ref)}"
                        )
                    shards.add([item[0] for item, _ in readable], features.astype(np.float32))
                if batch_number % shard_every == 0:
                    shards.flush()
                last = start + batch_size >= len(todo)
                progress.report(progress.total - len(todo) + start + len(batch_items), final=last)
    finally:
        shards.flush()
    return skipped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--images", type=Path, help="folder of .jpg/.jpeg/.png images")
    where.add_argument(
        "--tfds",
        metavar="TFDS_DATA_DIR",
        help="a TFDS data dir (folder or bucket path) holding a prepared coco_captions",
    )
    parser.add_argument(
        "--tfds_splits",
        default="+".join(TRAINING_SPLITS),
        help="'+'-joined Karpathy splits of --tfds to extract (default: the training splits)",
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="output folder (resumed if it exists)"
    )
    parser.add_argument("--batch_size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument(
        "--weights", default="imagenet", help="imagenet, none (random init) or a weights file"
    )
    parser.add_argument("--image_size", type=int, default=DEFAULT_IMAGE_SIZE)
    parser.add_argument(
        "--shard_every", type=int, default=DEFAULT_SHARD_EVERY, help="batches per shard"
    )
    parser.add_argument(
        "--ids", choices=ID_STYLES, default="filename", help="how file names become image ids"
    )
    parser.add_argument(
        "--skip_bad", action="store_true", help="report unreadable images and go on"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        images = (
            tfds_images(args.tfds, args.tfds_splits.split("+"))
            if args.tfds is not None
            else folder_images(args.images, args.ids)
        )
        store = extract_features(
            images,
            args.out,
            weights=args.weights,
            batch_size=args.batch_size,
            image_size=args.image_size,
            shard_every=args.shard_every,
            skip_bad=args.skip_bad,
        )
    except (CapsimError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {len(store)} x {store.dim} features to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
