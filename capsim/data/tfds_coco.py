"""COCO captions (Karpathy splits) from a prepared TFDS ``coco_captions``, without TensorFlow.

A copy prepared in ArrayRecord format (``tfds build coco_captions
--file_format=array_record``) is opened with TFDS's random-access data source
and read through grain, so training never imports TensorFlow. The builder is
rebuilt from the files' own ``features.json`` (the ``coco_captions`` code
needs TensorFlow just to describe its features). Images are never decoded
here; ``vtfn_jax.extract_features --tfds`` reads them from the same records.

Captions are small (616k of 123k images), so every process reads all of them:
the vocabulary and the held-out draws need them, and the training batches are
sharded per process by the grain pipeline, as for every caption source. Each
record also holds its JPEG, so a full read moves the dataset's ~20 GB once;
``READ_THREADS`` parallel reads keep that to seconds on a local disk.

A copy prepared as TFRecord (TFDS's default) is read through tf.data when
TensorFlow is installed (the ``[tf]`` extra); otherwise the error says how to
convert it once.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence

from capsim.data.captions import clean_caption
from capsim.data.records import CaptionRecord
from capsim.errors import CaptionError, DataFormatError
from capsim.progress import Progress

DATASET = "coco_captions"
CONFIG = "2014"
VERSION = "1.1.0"
KARPATHY_SPLITS = ("train", "restval", "val", "test")
TRAINING_SPLITS = ("train", "restval")
EVALUATION_SPLIT = "test"  # captioning papers report on it; THumB judges it
READ_THREADS = 16
PROGRESS_EVERY_S = 10.0
TF_EXTRA = "pip install -e '.[tf]'"
PREPARE_COMMAND = (
    f"{TF_EXTRA} && tfds build {DATASET} --file_format=array_record --data_dir=DIR "
    "(TensorFlow is needed once, to prepare; reading the ArrayRecord copy does not need it)"
)


@dataclasses.dataclass(frozen=True)
class TfdsImage:
    """One record of a split: where it is, its COCO id and its (caption id, text) pairs."""

    split: str
    index: int
    image_id: str
    captions: tuple[tuple[str, str], ...]


def data_dir_or_default(data_dir: str) -> str:
    """``data_dir``, or TFDS's default ($TFDS_DATA_DIR, else ~/tensorflow_datasets) when empty."""
    if data_dir:
        return data_dir
    return os.environ.get("TFDS_DATA_DIR") or os.path.expanduser("~/tensorflow_datasets")


def dataset_dir(data_dir: str):
    """The prepared dataset's folder (an ``epath.Path``: a local folder or a bucket path)."""
    from etils import epath

    return epath.Path(data_dir_or_default(data_dir)) / DATASET / CONFIG / VERSION


def open_builder(data_dir: str):
    """A read-only builder from the prepared files; a clear error when they are missing."""
    import tensorflow_datasets as tfds

    folder = dataset_dir(data_dir)
    if not (folder / "dataset_info.json").exists():
        raise FileNotFoundError(
            f"no prepared TFDS {DATASET} at {folder} (data.tfds_data_dir / --tfds): "
            f"prepare it once with {PREPARE_COMMAND}"
        )
    return tfds.builder_from_directory(str(folder))


def _check_splits(splits: Sequence[str], builder) -> None:
    unknown = [s for s in splits if s not in builder.info.splits]
    if unknown:
        raise DataFormatError(
            builder.data_dir,
            f"no split {unknown[0]!r} here; the splits are {sorted(builder.info.splits)}",
        )


def open_split(builder, split: str):
    """Random access to ``split``'s records, images left as JPEG bytes.

    ArrayRecord: TFDS's data source (no TensorFlow). TFRecord: a list read once
    through tf.data, which needs TensorFlow.
    """
    import tensorflow_datasets as tfds

    _check_splits([split], builder)
    decoders = {"image": tfds.decode.SkipDecoding()}
    if str(builder.info.file_format).lower().endswith("array_record"):
        return builder.as_data_source(split, decoders=decoders)
    try:
        import tensorflow  # noqa: F401
    except ImportError as error:
        raise DataFormatError(
            builder.data_dir,
            f"prepared as {builder.info.file_format}, which only TensorFlow reads. Either "
            f"install it ({TF_EXTRA}), or convert the copy once to ArrayRecord, which trains "
            "without it: tfds convert_format --dataset_dir="
            f"{builder.data_dir} --out_file_format=array_record (needs TensorFlow too)",
        ) from error
    return list(tfds.as_numpy(builder.as_dataset(split=split, decoders=decoders)))


def _image_of(split: str, index: int, example: dict) -> TfdsImage:
    """A record's id and captions; a caption that is not UTF-8 or is empty names its id."""
    captions = example["captions"]
    pairs = []
    for caption_id, raw in zip(captions["id"], captions["text"], strict=True):
        where = f"{split}[{index}] caption {int(caption_id)}"
        try:
            text = clean_caption(raw.decode("utf-8") if isinstance(raw, bytes) else str(raw))
        except UnicodeDecodeError as error:
            raise CaptionError(where, f"bytes are not valid UTF-8 ({error})") from error
        if not text:
            raise CaptionError(where, "caption is empty or whitespace only")
        pairs.append((str(int(caption_id)), text))
    return TfdsImage(split, index, str(int(example["image/id"])), tuple(pairs))


def read_images(builder, split: str) -> list[TfdsImage]:
    """Every record of ``split`` without its pixels, read in parallel through grain."""
    import grain

    source = open_split(builder, split)
    progress = Progress(
        len(source),
        unit="images",
        item="images",
        prefix=f"TFDS {DATASET} {split}: ",
        min_interval_s=PROGRESS_EVERY_S,
    )
    images = []
    dataset = grain.MapDataset.range(len(source)).map(lambda i: (i, source[i]))
    read_options = grain.ReadOptions(
        num_threads=READ_THREADS, prefetch_buffer_size=4 * READ_THREADS
    )
    for index, example in dataset.to_iter_dataset(read_options):
        images.append(_image_of(split, index, example))
        progress.report(index + 1, final=index + 1 == len(source))
    return images


def refuse_evaluation_split(builder, splits: Iterable[str]) -> None:
    """The Karpathy ``test`` split never trains: refused naming the split and one image."""
    if EVALUATION_SPLIT not in splits:
        return
    example = open_split(builder, EVALUATION_SPLIT)[0]
    raise DataFormatError(
        builder.data_dir,
        f"split {EVALUATION_SPLIT!r} (e.g. image {int(example['image/id'])}) is the Karpathy "
        "test split: captioning models are reported and caption metrics judged on it, so it "
        f"must stay out of training; train on {' + '.join(TRAINING_SPLITS)}",
    )


def read_captions(data_dir: str, splits: Sequence[str] = TRAINING_SPLITS) -> list[CaptionRecord]:
    """Caption records of ``splits`` (COCO ids, so every COCO rule applies to them)."""
    builder = open_builder(data_dir)
    refuse_evaluation_split(builder, splits)
    _check_splits(splits, builder)
    return [
        CaptionRecord(image.image_id, caption_id, text, split)
        for split in splits
        for image in read_images(builder, split)
        for caption_id, text in image.captions
    ]
