"""COCO from a prepared TFDS ``coco_captions``: captions, images and both papers' training.

The dataset is written offline in TFDS's own on-disk format (ArrayRecord files,
``dataset_info.json``, ``features.json``) by a builder with the features of
TFDS's ``coco_captions`` (its own code needs TensorFlow just to describe them),
so the library's real reading code runs end to end: the caption source, the
grain pipeline, a training run of each paper and features matched to captions.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import import_extra

from capsim.data import corpus, sources, tfds_coco
from capsim.errors import DataFormatError

COLORS = {"red": (200, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 200)}
THINGS = ("dog", "cat", "bus", "kite")
# split -> (first COCO id, images); no Karpathy test image among these ids
SPLITS = {"train": (100, 100), "restval": (1001, 20), "val": (2001, 60)}
KARPATHY_TEST_IMAGE = 391895  # a Karpathy test image (capsim/data/karpathy_coco_test_images.txt)
CAPTIONS_PER_IMAGE = 5


def scene(image_id: int) -> tuple[str, str]:
    return list(COLORS)[image_id % len(COLORS)], THINGS[image_id % len(THINGS)]


def captions_of(image_id: int) -> list[str]:
    color, thing = scene(image_id)
    return [f"a {color} {thing} in picture number {k} ." for k in range(CAPTIONS_PER_IMAGE)]


def jpeg(image_id: int) -> bytes:
    image = import_extra("PIL.Image")
    rng = np.random.default_rng(image_id)
    pixels = np.clip(np.array(COLORS[scene(image_id)[0]]) + rng.normal(0, 20, (24, 32, 3)), 0, 255)
    buffer = io.BytesIO()
    image.fromarray(pixels.astype(np.uint8)).save(buffer, "JPEG")
    return buffer.getvalue()


def split_ids(split: str) -> list[int]:
    if split == "test":
        return [KARPATHY_TEST_IMAGE, 3001]
    first, count = SPLITS[split]
    ids = list(range(first, first + count))
    return [*ids, KARPATHY_TEST_IMAGE] if split == "restval" else ids  # a mislabelled copy


def build_coco_captions(data_dir: Path, file_format: str = "array_record") -> Path:
    """A small coco_captions/2014/1.1.0 with the real dataset's features and splits."""
    import tensorflow_datasets as tfds

    class CocoCaptions(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        name = tfds_coco.DATASET
        BUILDER_CONFIGS = [  # noqa: RUF012 (TFDS's own class attribute)
            tfds.core.BuilderConfig(
                name=tfds_coco.CONFIG, version=tfds.core.Version(tfds_coco.VERSION)
            )
        ]

        def _info(self):
            objects = {
                "id": np.int64,
                "area": np.int64,
                "bbox": tfds.features.BBoxFeature(),
                "label": tfds.features.ClassLabel(num_classes=80),
                "is_crowd": np.bool_,
            }
            features = {
                "image": tfds.features.Image(encoding_format="jpeg"),
                "image/filename": tfds.features.Text(),
                "image/id": np.int64,
                "objects": tfds.features.Sequence(objects),
                "captions": tfds.features.Sequence({"text": np.str_, "id": np.int64}),
            }
            return tfds.core.DatasetInfo(
                builder=self, features=tfds.features.FeaturesDict(features)
            )

        def _split_generators(self, dl_manager):
            return {split: self._generate_examples(split) for split in (*SPLITS, "test")}

        def _generate_examples(self, split):
            for image_id in split_ids(split):
                texts = captions_of(image_id)
                yield (
                    f"{split}{image_id}",
                    {
                        "image": jpeg(image_id),
                        "image/filename": f"COCO_val2014_{image_id:012d}.jpg",
                        "image/id": image_id,
                        "objects": {
                            "id": [image_id],
                            "area": [100],
                            "bbox": [tfds.features.BBox(0.1, 0.1, 0.6, 0.6)],
                            "label": [image_id % 80],
                            "is_crowd": [False],
                        },
                        "captions": {
                            "text": texts,
                            "id": [image_id * 10 + k for k in range(len(texts))],
                        },
                    },
                )

    builder = CocoCaptions(data_dir=str(data_dir), file_format=file_format)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            compute_stats=tfds.download.ComputeStatsMode.SKIP
        )
    )
    return data_dir


@pytest.fixture(scope="module")
def tfds_dir(tmp_path_factory) -> Path:
    return build_coco_captions(tmp_path_factory.mktemp("tfds"))


def test_training_captions_are_read_as_written(tfds_dir):
    records = tfds_coco.read_captions(str(tfds_dir))
    expected = {
        (str(i), str(i * 10 + k), text)
        for split in tfds_coco.TRAINING_SPLITS
        for i in split_ids(split)
        for k, text in enumerate(captions_of(i))
    }
    assert {(r.image_id, r.caption_id, r.text) for r in records} == expected
    assert len(records) == len(expected)  # each caption once
    assert {r.split for r in records} == set(tfds_coco.TRAINING_SPLITS)


def test_the_karpathy_test_split_is_refused_naming_it_and_an_image(tfds_dir):
    with pytest.raises(DataFormatError, match=r"split 'test' \(e\.g\. image (391895|3001)\)"):
        tfds_coco.read_captions(str(tfds_dir), ("train", "test"))
    data = {"tfds_data_dir": str(tfds_dir), "karpathy_splits": ("train", "test")}
    with pytest.raises(DataFormatError, match="Karpathy test split"):
        sources.read_source("coco_tfds", "unused", data)


def test_karpathy_test_images_of_any_split_are_dropped_and_counted(tfds_dir, tmp_path, caplog):
    import ml_collections

    data = ml_collections.ConfigDict(
        dict(
            data_dir=str(tmp_path),
            sources=("coco_tfds",),
            dev_sets=("coco_tfds",),
            dev_images=10,
            tfds_data_dir=str(tfds_dir),
            karpathy_splits=("train", "restval"),
            seed=0,
        )
    )
    with caplog.at_level("WARNING"):
        train, dev = corpus.load_sources(data)
    assert str(KARPATHY_TEST_IMAGE) not in {r.image_id for r in train}
    assert "dropped 5 training captions of 1 Karpathy COCO test images" in caplog.text
    dev_images = {r.image_id for r in dev["dev_coco_tfds"]}
    assert len(dev_images) == 10 and dev_images <= {str(i) for i in split_ids("val")}


def test_a_missing_dataset_names_the_folder_and_how_to_prepare_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"coco_captions/2014/1\.1\.0.*tfds build"):
        tfds_coco.read_captions(str(tmp_path))


def test_an_unknown_split_is_named(tfds_dir):
    with pytest.raises(DataFormatError, match=r"no split 'restval2'.*'train'"):
        tfds_coco.read_captions(str(tfds_dir), ("restval2",))


@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is not None,
    reason="TensorFlow is installed, so a TFRecord copy is read through tf.data",
)
def test_a_tfrecord_copy_without_tensorflow_says_how_to_convert_it(tfds_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tfds_dir, copy)
    info_path = tfds_coco.dataset_dir(str(copy)) / "dataset_info.json"
    info = json.loads(info_path.read_text())
    info["fileFormat"] = "tfrecord"
    info_path.write_text(json.dumps(info))
    with pytest.raises(DataFormatError, match=r"tfrecord.*\[tf\].*convert_format"):
        tfds_coco.read_captions(str(copy))


TRAIN_BOTH_PAPERS = r"""
import json, sys
from pathlib import Path

tfds_dir, work = sys.argv[1], Path(sys.argv[2])
import numpy as np
from vtfn_jax import extract_features as extract
from vtfn_jax.images import tfds_images

# Features of the training splits' images, read from the same records as the captions.
images = tfds_images(tfds_dir, ["train", "restval"])
mean_colour = lambda batch: np.asarray(batch).mean(axis=(1, 2))  # [B, 3]: an image's colour
store = extract.extract_features(images, work / "features", model=mean_colour, image_size=8)
print("FEATURES", len(store), store.dim)

from configs import coco_bow, i2ce_coco_recon
from i2ce_jax import train as i2ce_train
from vtfn_jax import train as vtfn_train

common = f"runlocal,data_dir={work},sources=coco_tfds,tfds_data_dir={tfds_dir}"
vtfn_config = coco_bow.get_config(f"{common},features={work / 'features'}")
vtfn_train.train_and_evaluate(vtfn_config, work / "vtfn_jax")
i2ce_config = i2ce_coco_recon.get_config(f"{common},dev_sets=coco_tfds")
i2ce_train.train_and_evaluate(i2ce_config, work / "i2ce_jax")
print("TENSORFLOW_IMPORTED", "tensorflow" in sys.modules)
"""


@pytest.mark.slow  # features, then both papers' trainings, in a fresh process (25 s)
def test_both_papers_train_from_tfds_without_tensorflow(tfds_dir, tmp_path):
    """Features from the TFDS images, then a few steps of VTFN and of I2CE on its
    captions, in a fresh process in which TensorFlow is never imported."""
    result = subprocess.run(
        [sys.executable, "-c", TRAIN_BOTH_PAPERS, str(tfds_dir), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    training_images = len({i for s in tfds_coco.TRAINING_SPLITS for i in split_ids(s)})
    assert f"FEATURES {training_images} 3" in output
    assert "TENSORFLOW_IMPORTED False" in output
    assert "dropped 5 training captions of 1 Karpathy COCO test images" in output
    for paper in ("vtfn_jax", "i2ce_jax"):
        rows = [
            json.loads(line)
            for line in (tmp_path / paper / "metrics.jsonl").read_text().splitlines()
        ]
        losses = [row["train/loss"] for row in rows if "train/loss" in row]
        assert losses and all(np.isfinite(losses)), (paper, rows[:3])
    vtfn_config = json.loads((tmp_path / "vtfn_jax" / "config.json").read_text())
    assert vtfn_config["data"]["sources"] == ["coco_tfds"]
