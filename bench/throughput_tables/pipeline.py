"""bench/throughput.py's input-pipeline rows, on a COCO-sized synthetic corpus."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import grain
import numpy as np

from bench import harness
from bench.cases.catalogue import (
    IMAGE_DIM,
    MAX_TOKENS,
    MIN_TOKENS,
    VOCAB_SIZE,
    HostBatch,
    caption_batches,
)
from bench.harness import load_average, ratio_summary, ratio_table, time_rounds
from capsim.data import corpus as corpus_lib
from capsim.data.pipeline import READ_OPTIONS, training_dataset
from i2ce_jax import data as i2ce_data
from vtfn_jax import kinds as vtfn_kinds
from vtfn_jax.features import ARRAY_RECORD_FILE, ArrayRecordFeatures, FeatureStore

COCO_IMAGES = 123_287  # COCO 2014 train + val, the images VTFN trains on at scale


def synthetic_corpus(
    num_images: int,
    captions_per_image: int,
    max_len: int,
    seed: int = 0,
    vocab_size: int = VOCAB_SIZE,
) -> corpus_lib.EncodedCorpus:
    """An encoded corpus of COCO's shape (random ids) for input-pipeline timing."""
    count = num_images * captions_per_image
    (captions,) = caption_batches(
        np.random.default_rng(seed),
        count=1,
        batch=count,
        max_len=max_len,
        vocab=vocab_size,
        lengths=(MIN_TOKENS, min(MAX_TOKENS, max_len)),
    )
    image_index = np.repeat(np.arange(num_images, dtype=np.int32), captions_per_image)
    groups = list(np.arange(count).reshape(num_images, captions_per_image))
    records = [None] * count  # only len() is read
    return corpus_lib.EncodedCorpus(
        records,
        captions["anchor_ids"],
        captions["anchor_mask"],
        image_index,
        [str(k) for k in range(num_images)],
        groups,
    )


def _per_example_dataset(split: corpus_lib.CaptionSplit, with_features: bool, batch_size: int):
    """The previous pipeline, as the reference: one Python call per example, then grain's batch.

    VTFN examples carried a caption, its image's features and group; I2CE
    examples an anchor and a random other caption of its image.
    """
    corpus = split.corpus

    def example(row: int, rng: np.random.Generator) -> HostBatch:
        image = corpus.image_index[row]
        if with_features:
            return {
                "ids": corpus.ids[row],
                "mask": corpus.mask[row],
                "features": split.features[image],
                "group": np.int32(image),
            }
        siblings = corpus.captions_of_image[image]
        similar = int(rng.choice(siblings[siblings != row]))
        return {
            "anchor_ids": corpus.ids[row],
            "anchor_mask": corpus.mask[row],
            "similar_ids": corpus.ids[similar],
            "similar_mask": corpus.mask[similar],
            "group": image,
        }

    dataset = grain.MapDataset.range(len(corpus)).seed(0).shuffle().repeat(None)
    batched = dataset.random_map(example).batch(batch_size, drop_remainder=True)
    return batched.to_iter_dataset(READ_OPTIONS)


def _time_pipelines(
    ours: grain.IterDataset, reference: grain.IterDataset, *, batches: int, rounds: int
) -> dict:
    """Examples/s of two pipelines drained in alternating rounds of ``batches`` batches.

    Each round starts a fresh iterator and takes its first batch before the clock
    starts, then closes it, so neither side's background prefetch threads run on
    during the other's round.
    """
    datasets = {"ours": ours, "reference": reference}
    size = len(next(iter(next(iter(ours)).values())))  # every batch has the same size
    live: dict[str, grain.DatasetIterator] = {}

    def start(name: str) -> None:
        live[name] = iter(datasets[name])
        next(live[name])  # thread start-up and the epoch's order, off the clock

    def drain(name: str) -> None:
        for _ in range(batches):
            next(live[name])

    load_start = load_average()
    seconds = time_rounds(
        {name: lambda i, name=name: drain(name) for name in datasets},
        rounds,
        before=start,
        after=lambda name: live.pop(name).close(),
    )
    return {
        "ours": batches * size / float(np.median(seconds["ours"])),
        "reference": batches * size / float(np.median(seconds["reference"])),
        **ratio_summary(seconds["ours"], seconds["reference"]),
        "rounds": rounds,
        "load_start": load_start,
        "load_end": load_average(),
    }


def measure_pipeline(
    *, batch_size: int, batches: int, rounds: int = harness.ROUNDS, num_images: int = COCO_IMAGES
) -> list[dict]:
    """Examples/s of the trainers' input pipelines on a COCO-sized synthetic corpus.

    VTFN gathers captions and 2048-d float32 features of ``num_images`` images
    (in memory, as vtfn_jax.data holds them); I2CE gathers anchor and similar
    captions. Each is set against the previous design (a Python call per
    example). The VTFN features are also written once to an ArrayRecord store
    in a temporary directory and read from there batch by batch
    (vtfn_jax.features.ArrayRecordFeatures), set against the in-memory path.
    """
    captions = synthetic_corpus(num_images, 5, max_len=24)
    features = np.random.default_rng(1).standard_normal((num_images, IMAGE_DIM), np.float32)
    split = corpus_lib.CaptionSplit(captions, features)

    def batched(make_batch: Callable) -> grain.IterDataset:
        return training_dataset(len(captions), make_batch, global_batch_size=batch_size, seed=0)

    comparisons = [
        (
            "VTFN-pipeline",
            "VTFN input pipeline (features in memory): batch gathering vs one Python call per example",
            batched(vtfn_kinds.training_batches(split, pivot=False).host_batch),
            _per_example_dataset(split, True, batch_size),
        ),
        (
            "I2CE-pipeline",
            "I2CE input pipeline: batch gathering vs one Python call per example",
            batched(i2ce_data.make_batch_fn(captions)),
            _per_example_dataset(split, False, batch_size),
        ),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as store_dir:
        ids = [str(k) for k in range(num_images)]
        FeatureStore.from_arrays(ids, features).save(store_dir, layout="array_record")
        on_disk = ArrayRecordFeatures(Path(store_dir) / ARRAY_RECORD_FILE, IMAGE_DIM)
        disk_split = corpus_lib.CaptionSplit(captions, on_disk)
        comparisons.append(
            (
                "VTFN-pipeline-ArrayRecord",
                "VTFN input pipeline reading features from an ArrayRecord store vs from memory",
                batched(vtfn_kinds.training_batches(disk_split, pivot=False).host_batch),
                batched(vtfn_kinds.training_batches(split, pivot=False).host_batch),
            )
        )
        for name, description, ours, reference in comparisons:
            timing = _time_pipelines(ours, reference, batches=batches, rounds=rounds)
            rows.append(
                {
                    "name": name,
                    "what": "pipeline",
                    "description": description,
                    **timing,
                    "images": num_images,
                }
            )
    return rows


def pipeline_table(rows: Sequence[Mapping]) -> str:
    """One line per input pipeline: examples/s, the gain over per-example maps, the headroom."""
    headroom = {"headroom over the fastest step": lambda r: f"{r['headroom']:.1f}x"}
    return ratio_table(rows, "ex/s", headroom)
