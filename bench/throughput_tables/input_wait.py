"""bench/throughput.py's input-wait rows: a real training loop against its bare step.

    python bench/throughput.py --only input [--input_batch 1024] [--rounds 5] [--toy]

For VTFN-BOW, VTFN-GRU and I2CE (their coco configs) at batch 1,024, on a
synthetic corpus of COCO's size (123,287 images, 5 captions each of 8-20 tokens,
vocabulary 10,000, 2048-d float32 features): the library's Trainer with its real
input path (``Batches.dataset``, grain, ``Trainer.device_batches``, the step, a
loss read back every ``log_every`` steps as ``Trainer.fit``'s loop does) against
the same compiled step repeated on one batch already on the device. Each VTFN
model runs both input paths (capsim.data.device_tables): its feature table on the
device (``config.device_tables=on``: the batch carries image indices, the step
gathers) and gathered on the host (``off``: 8 MB of rows per batch copied in). I2CE's
batches index no table: its token rows (about 200 KB a batch) are gathered on the
host, the one path it has.

Rounds alternate loop and step (bench.harness.time_rounds). Each loop round starts
a fresh grain iterator and takes its first batch before the clock (as the pipeline
rows do), so no batch made during the step's round is counted; each round runs
enough steps for about ``ROUND_SECONDS`` (from the warm-up's pace). A row reports
both sides' examples/s (median rounds), loop / step per round (median, min, max),
``input_wait_share``: the share of the loop's time spent waiting in
``device_batches`` (the progress line's "input N%"), and the load around it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence

import jax
import ml_collections
import numpy as np

from bench import harness
from bench.cases.catalogue import IMAGE_DIM, PAPER, TRAINING_MODELS, narrowed
from bench.harness import load_average, load_cell, ratio_summary, time_rounds
from bench.throughput_tables.pipeline import COCO_IMAGES, synthetic_corpus
from capsim.data import corpus as corpus_lib
from capsim.data.pipeline import Batches
from capsim.tables import format_cells
from capsim.train import Trainer
from i2ce_jax import data as i2ce_data
from i2ce_jax import model as i2ce_model
from vtfn_jax import kinds as vtfn_kinds
from vtfn_jax import model as vtfn_model

SECTION = "## Input wait"
RESULTS_JSON = harness.RESULTS_DIR / "input_wait.json"
ROUND_SECONDS = 4.0  # each side's round, from the warm-up's pace
MIN_STEPS, MAX_STEPS = 5, 200
# The model's config, as its coco config file gives it (bench/cases/catalogue.py's rows).
INPUT_MODELS: dict[str, Callable[[], ml_collections.ConfigDict]] = {
    "VTFN-BOW": TRAINING_MODELS["VTFN-BOW"],
    "VTFN-GRU": TRAINING_MODELS["VTFN-GRU"],
    "I2CE-default": TRAINING_MODELS["I2CE-default"],
}
PATHS = {"device tables": "on", "host gather": "off"}


@dataclasses.dataclass(frozen=True)
class InputSizes:
    """The corpus and batch; ``width`` shrinks every embedding/hidden size (tests)."""

    images: int = COCO_IMAGES
    captions_per_image: int = 5
    batch_size: int = 1024
    vocab: int = PAPER.vocab
    image_dim: int = IMAGE_DIM
    width: int | None = None
    round_seconds: float = ROUND_SECONDS
    warmup: int = 3
    max_steps: int = MAX_STEPS


TOY = InputSizes(
    images=300, batch_size=32, vocab=200, image_dim=16, width=8, round_seconds=0.2, warmup=1
)
TOY_ROUNDS = 2


def _config(name: str, sizes: InputSizes, setting: str) -> ml_collections.ConfigDict:
    config = narrowed(INPUT_MODELS[name](), sizes.width)
    config.batch_size, config.device_tables = sizes.batch_size, setting
    return config


@dataclasses.dataclass
class Corpus:
    """The synthetic corpus and image features every row trains on."""

    captions: corpus_lib.EncodedCorpus
    features: np.ndarray

    @classmethod
    def make(cls, sizes: InputSizes, max_len: int, other: Corpus | None = None) -> Corpus:
        """Captions padded to ``max_len``; the features of ``other`` when given."""
        captions = synthetic_corpus(
            sizes.images, sizes.captions_per_image, max_len, vocab_size=sizes.vocab
        )
        if other is not None:
            return cls(captions, other.features)
        rng = np.random.default_rng(1)
        features = rng.standard_normal((sizes.images, sizes.image_dim), np.float32)
        return cls(captions, features)


def _model_and_batches(
    name: str, config: ml_collections.ConfigDict, corpus: Corpus, sizes: InputSizes
) -> tuple[object, Callable, Batches]:
    """The model, its loss and its training batches, as its task declares them."""
    if name.startswith("VTFN"):
        split = corpus_lib.CaptionSplit(corpus.captions, corpus.features)
        model = vtfn_model.build_model(config, sizes.vocab, sizes.image_dim)
        return model, vtfn_model.make_loss_fn(config), vtfn_kinds.training_batches(split, False)
    model = i2ce_model.build_model(config, sizes.vocab)
    batches = i2ce_data.training_batches(config, corpus.captions)
    return model, i2ce_model.make_loss_fn(config), batches


class LoopAndStep:
    """One model on one input path: the training loop's pieces, and its bare step."""

    def __init__(self, trainer: Trainer, dataset, log_every: int):
        self.trainer, self.dataset, self.log_every = trainer, dataset, log_every
        iterator = iter(dataset)
        self.placed = trainer.global_batch(next(iterator))  # the bare step's batch
        iterator.close()
        self.done, self.waited, self.live = 0, [], None

    def _step(self, batch) -> dict:
        metrics = self.trainer.step(batch)
        self.done += 1
        if self.done % self.log_every == 0:  # the loop reads its loss back (Run.loop)
            float(metrics["loss"])
        return metrics

    def start_loop(self) -> None:
        """A fresh iterator and its first batch, off the clock."""
        iterator = iter(self.dataset)
        batches = self.trainer.device_batches(iterator)
        self.live = (iterator, batches, next(batches)[0])

    def stop_loop(self) -> None:
        self.live[1].close()  # the placing thread first, then the iterator it reads
        self.live[0].close()
        self.live = None

    def loop(self, steps: int) -> None:
        _, batches, first = self.live
        metrics, waited = self._step(first), 0.0
        for _ in range(steps - 1):
            batch, _, seconds = next(batches)
            waited += seconds
            metrics = self._step(batch)
        jax.block_until_ready((self.trainer.state, metrics))
        self.waited.append(waited)

    def step(self, steps: int) -> None:
        metrics = None
        for _ in range(steps):
            metrics = self._step(self.placed)
        jax.block_until_ready((self.trainer.state, metrics))

    def pace(self, warmup: int) -> float:
        """Seconds per bare step after ``warmup`` of them (the compilation done first)."""
        self.step(1)
        began = time.perf_counter()
        self.step(warmup)
        return (time.perf_counter() - began) / warmup


def measure_input(
    name: str, path: str | None, corpus: Corpus, sizes: InputSizes, rounds: int
) -> dict:
    """One row: the loop and the bare step of ``name`` on ``path`` (None: no tables)."""
    config = _config(name, sizes, PATHS.get(path, "auto"))
    model, loss_fn, batches = _model_and_batches(name, config, corpus, sizes)
    trainer = Trainer(config, model, loss_fn, tables=batches.tables)
    expected = path or "no tables"
    if trainer.input_path.name != expected:
        raise RuntimeError(f"{name}: asked for {expected}, the trainer took {trainer.input_path}")
    sides = LoopAndStep(
        trainer, batches.dataset(config, trainer.tables_on_device), config.log_every
    )
    pace = sides.pace(sizes.warmup)
    steps = int(min(sizes.max_steps, max(MIN_STEPS, math.ceil(sizes.round_seconds / pace))))
    sides.start_loop()
    sides.loop(sizes.warmup)  # the loop's own warm-up: grain threads, placement
    sides.stop_loop()
    sides.waited.clear()
    load_start = load_average()
    seconds = time_rounds(
        {"loop": lambda i: sides.loop(steps), "step": lambda i: sides.step(steps)},
        rounds,
        before=lambda side: sides.start_loop() if side == "loop" else None,
        after=lambda side: sides.stop_loop() if side == "loop" else None,
    )
    loop_s, step_s = float(np.median(seconds["loop"])), float(np.median(seconds["step"]))
    ratio = ratio_summary(seconds["loop"], seconds["step"])  # step s / loop s = loop / step speed
    examples = steps * sizes.batch_size
    return {
        "name": name,
        "what": "input",
        "path": trainer.input_path.name,
        "batch": sizes.batch_size,
        "steps": steps,
        "rounds": rounds,
        "loop_examples_per_second": examples / loop_s,
        "step_examples_per_second": examples / step_s,
        "loop_over_step_median": ratio["ratio_median"],
        "loop_over_step_min": ratio["ratio_min"],
        "loop_over_step_max": ratio["ratio_max"],
        "input_wait_share": sum(sides.waited) / sum(seconds["loop"]),
        "batch_bytes": int(sum(np.asarray(v).nbytes for v in sides.placed.values())),
        "images": sizes.images,
        "load_start": load_start,
        "load_end": load_average(),
    }


def measure_input_rows(
    sizes: InputSizes = InputSizes(),
    rounds: int = harness.ROUNDS,
    models: Sequence[str] = tuple(INPUT_MODELS),
    report: Callable[[dict], None] = lambda row: None,
) -> list[dict]:
    """Every model on each of its paths (VTFN: device tables, host gather; I2CE: its one),
    each on captions padded to its config's ``data.max_len``, all with the same features."""
    corpora: dict[int, Corpus] = {}
    rows = []
    for name in models:
        max_len = INPUT_MODELS[name]().data.max_len
        if max_len not in corpora:
            made = Corpus.make(sizes, max_len, next(iter(corpora.values()), None))
            corpora[max_len] = made
        for path in PATHS if name.startswith("VTFN") else (None,):
            rows.append(measure_input(name, path, corpora[max_len], sizes, rounds))
            report(rows[-1])
    return rows


def input_table(rows: Sequence[Mapping]) -> str:
    return format_cells(
        [
            "model",
            "input path",
            "batch",
            "loop ex/s",
            "step ex/s",
            "loop / step median",
            "min",
            "max",
            "input wait",
            "batch bytes sent",
            "load start / end",
        ],
        [
            [
                r["name"],
                r["path"],
                r["batch"],
                f"{r['loop_examples_per_second']:.0f}",
                f"{r['step_examples_per_second']:.0f}",
                f"{r['loop_over_step_median']:.3f}",
                f"{r['loop_over_step_min']:.3f}",
                f"{r['loop_over_step_max']:.3f}",
                f"{r['input_wait_share']:.1%}",
                f"{r['batch_bytes']:,}",
                load_cell(r),
            ]
            for r in rows
        ],
    )


def write_input_results(command: str, rows: list[dict], machine: dict) -> str:
    """bench/results/input_wait.json (the rows) and the "## Input wait" section."""
    table = input_table(rows)
    r0 = rows[0]
    section = f"""{SECTION}

Command: `{command}`

Machine: {machine["cpu_cores"]} CPU cores ({machine["platform"]}), JAX {machine["jax"]} on
{machine["jax_devices"]} device(s), shared with other jobs. A training loop's examples/s (the
library's Trainer with its real input path: `Batches.dataset` through grain,
`Trainer.device_batches`, the step, the loss read back every `log_every` steps) against the same
compiled step repeated on one batch already on the device; batch {r0["batch"]}, a synthetic corpus
of {r0["images"]:,} images with 5 captions each (8-20 tokens, vocabulary 10,000) and 2048-d
float32 features. VTFN runs both input paths (`config.device_tables`): its feature table on the
device (the batch carries image indices, the step gathers the rows) and gathered on the host
(the rows copied in every step). I2CE's batches index no table. {r0["rounds"]} alternating rounds
of about {ROUND_SECONDS:.0f} s a side (the steps per round in the JSON); loop / step is per round
(1: the loop is as fast as its step); input wait is the share of the loop's time spent waiting in
`device_batches`, as the progress line's "input N%".

{table}
"""
    harness.update_section(SECTION, section)
    RESULTS_JSON.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_JSON.write_text(json.dumps(rows, indent=2) + "\n")
    return table
