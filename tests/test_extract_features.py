"""Resumable feature extraction on a few generated images (tiny Keras model; InceptionV3 is slow)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import import_extra, requires_keras, requires_pil

from capsim.errors import DataFormatError, FeatureError
from vtfn_jax import extract_features as extract
from vtfn_jax.features import FeatureStore

IMAGE_SIZE = 32
TINY_DIM = 4
NUM_IMAGES = 6


pytestmark = [requires_keras, requires_pil]


@pytest.fixture(scope="module")
def keras():
    return extract._import_keras()


@pytest.fixture(scope="module")
def tiny_model(keras):
    return keras.Sequential(
        [
            keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3)),
            keras.layers.Conv2D(
                TINY_DIM, 3, kernel_initializer=keras.initializers.GlorotUniform(seed=0)
            ),
            keras.layers.GlobalAveragePooling2D(),
        ],
        name="tiny",
    )


def write_images(directory: Path, names: list[str] | None = None) -> list[str]:
    """Small images of different sizes and colours, so every feature row differs."""
    image_module = import_extra("PIL.Image")
    directory.mkdir(parents=True, exist_ok=True)
    names = names or [f"img{i}.png" for i in range(NUM_IMAGES - 1)] + ["photo.jpg"]
    rng = np.random.default_rng(0)
    for i, name in enumerate(names):
        pixels = rng.integers(0, 256, size=(20 + 3 * i, 40 - 2 * i, 3), dtype=np.uint8)
        image_module.fromarray(pixels).save(directory / name)
    return sorted(names)


class CountingModel:
    """Wraps a model, counts calls and can fail on a given call to simulate an interruption."""

    def __init__(self, model, fail_on_call: int | None = None):
        self.model, self.fail_on_call = model, fail_on_call
        self.name = model.name  # same name: the output folder accepts it as the same model
        self.calls = 0

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError("simulated interruption")
        return np.asarray(self.model.predict_on_batch(batch))


def run(image_dir, out_dir, model, **kwargs) -> FeatureStore:
    return extract.extract_features(
        image_dir, out_dir, model=model, batch_size=2, image_size=IMAGE_SIZE, **kwargs
    )


def test_extract_writes_feature_store(tmp_path, tiny_model, capsys):
    names = write_images(tmp_path / "images")
    store = run(tmp_path / "images", tmp_path / "out", CountingModel(tiny_model))
    assert store.ids == tuple(names)
    assert store.matrix.shape == (NUM_IMAGES, TINY_DIM)
    assert len({tuple(row) for row in store.matrix.round(6)}) == NUM_IMAGES
    loaded = FeatureStore.load(tmp_path / "out")
    np.testing.assert_array_equal(loaded.matrix, store.matrix)
    assert json.loads((tmp_path / "out" / "meta.json").read_text())["source"] == "custom model tiny"
    assert not (tmp_path / "out" / "shards").exists()
    progress = capsys.readouterr().err
    assert (
        f"images {NUM_IMAGES}/{NUM_IMAGES}" in progress
        and "images/s" in progress
        and "ETA" in progress
    )


@pytest.mark.parametrize("shard_every", [1, 3])
def test_interrupted_run_resumes_with_the_remaining_images(tmp_path, tiny_model, shard_every):
    """Fails on the 3rd batch of 2; the 2 finished batches survive (as shards, or flushed on error)."""
    write_images(tmp_path / "images")
    reference = run(tmp_path / "images", tmp_path / "reference", CountingModel(tiny_model))

    with pytest.raises(RuntimeError, match="simulated interruption"):
        run(
            tmp_path / "images",
            tmp_path / "out",
            CountingModel(tiny_model, fail_on_call=3),
            shard_every=shard_every,
        )
    shard_ids = [
        json.loads(path.read_text())
        for path in sorted((tmp_path / "out" / "shards").glob("*.ids.json"))
    ]
    assert sum(len(ids) for ids in shard_ids) == 4
    assert not (tmp_path / "out" / "features.npy").exists()

    resumed_model = CountingModel(tiny_model)
    resumed = run(tmp_path / "images", tmp_path / "out", resumed_model, shard_every=shard_every)
    assert resumed_model.calls == 1  # only the last 2 images
    assert resumed.ids == reference.ids
    np.testing.assert_allclose(resumed.matrix, reference.matrix, rtol=1e-6, atol=1e-6)


def test_complete_output_is_not_recomputed_and_new_images_are_added(tmp_path, tiny_model):
    write_images(tmp_path / "images")
    first = run(tmp_path / "images", tmp_path / "out", CountingModel(tiny_model))
    again = run(tmp_path / "images", tmp_path / "out", CountingModel(tiny_model, fail_on_call=1))
    np.testing.assert_array_equal(again.matrix, first.matrix)

    write_images(tmp_path / "images", ["zz_new.png"])
    model = CountingModel(tiny_model)
    grown = run(tmp_path / "images", tmp_path / "out", model)
    assert model.calls == 1 and len(grown) == NUM_IMAGES + 1 and grown.ids[-1] == "zz_new.png"
    np.testing.assert_array_equal(grown.matrix[:NUM_IMAGES], first.matrix)


def test_output_folder_of_another_configuration_is_refused(tmp_path, tiny_model):
    write_images(tmp_path / "images")
    run(tmp_path / "images", tmp_path / "out", CountingModel(tiny_model))
    with pytest.raises(DataFormatError, match=r"run.json: written by a run with"):
        run(tmp_path / "images", tmp_path / "out", CountingModel(tiny_model), id_style="stem")


def test_unreadable_image_names_the_file_or_is_skipped(tmp_path, tiny_model):
    write_images(tmp_path / "images")
    (tmp_path / "images" / "broken.png").write_bytes(b"not an image")
    with pytest.raises(DataFormatError, match=r"broken.png: cannot read image"):
        run(tmp_path / "images", tmp_path / "out", CountingModel(tiny_model))

    store = run(tmp_path / "images", tmp_path / "out2", CountingModel(tiny_model), skip_bad=True)
    assert len(store) == NUM_IMAGES and "broken.png" not in store
    skipped = json.loads((tmp_path / "out2" / "skipped_images.json").read_text())
    assert [Path(path).name for path in skipped] == ["broken.png"]


def test_coco_ids_and_duplicate_ids(tmp_path, tiny_model):
    write_images(
        tmp_path / "images", ["COCO_val2014_000000000139.jpg", "COCO_val2014_000000000285.jpg"]
    )
    store = run(tmp_path / "images", tmp_path / "out", CountingModel(tiny_model), id_style="coco")
    assert store.ids == ("139", "285")
    write_images(tmp_path / "images", ["000000000139.png"])
    with pytest.raises(FeatureError, match=r"image .139.: both .* map to this id"):
        run(tmp_path / "images", tmp_path / "out3", CountingModel(tiny_model), id_style="coco")


def test_cli_plumbing(tmp_path, tiny_model, monkeypatch):
    """The CLI with InceptionV3 swapped for the tiny model (the real network is the slow test)."""
    write_images(tmp_path / "images")
    built = {}

    def fake_inception(weights, image_size):
        built.update(weights=weights, image_size=image_size)
        return tiny_model

    monkeypatch.setattr(extract, "build_inception_v3", fake_inception)
    argv = [
        "--images",
        str(tmp_path / "images"),
        "--out",
        str(tmp_path / "out"),
        "--weights",
        "none",
        "--batch_size",
        "4",
        "--image_size",
        str(IMAGE_SIZE),
    ]
    assert extract.main(argv) == 0
    assert built == {"weights": None, "image_size": IMAGE_SIZE}
    assert FeatureStore.load(tmp_path / "out").matrix.shape == (NUM_IMAGES, TINY_DIM)
    assert extract.main(["--images", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")]) == 1


@pytest.mark.slow  # builds and runs the full InceptionV3 (23 s)
def test_inception_v3_random_weights_gives_2048_d(tmp_path):
    """Real InceptionV3 at 299x299 (weights=None: no download); about 30 s on a small CPU."""
    names = write_images(tmp_path / "images")
    argv = [
        "--images",
        str(tmp_path / "images"),
        "--out",
        str(tmp_path / "out"),
        "--weights",
        "none",
    ]
    assert extract.main(argv) == 0
    store = FeatureStore.load(tmp_path / "out", expected_dim=2048)
    assert store.ids == tuple(names) and store.matrix.shape == (NUM_IMAGES, 2048)
