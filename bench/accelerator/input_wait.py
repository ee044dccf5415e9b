"""bench/accelerator_check.py's input-wait rows: bench/throughput_tables/input_wait.py in a
short lease (its models and synthetic corpus come from bench/cases/catalogue.py: no torch)."""

from __future__ import annotations

import functools

from bench.accelerator.rows import Recorder
from bench.throughput_tables import input_wait as throughput_input

# The input-wait rows (bench/throughput_tables/input_wait.py): the library's training loop with
# its real input path against its bare step, at batch 1,024 on a synthetic COCO-like corpus of 30k
# images (the wait is per batch: the corpus size matters only for memory), in the order of
# how hard the step presses on its input.
INPUT_ROWS = (
    ("VTFN-GRU", "device tables"),
    ("I2CE-default", None),
    ("VTFN-BOW", "device tables"),
    ("VTFN-BOW", "host gather"),
)
# bench.throughput_tables.input_wait.InputSizes
INPUT_FULL = dict(images=30_000, round_seconds=1.0, warmup=2)
INPUT_ROUNDS = 3


def input_wait(rec: Recorder, toy: bool, share: float) -> None:
    """The share of a real training loop's time spent waiting on its input, per model and
    input path (capsim.data.device_tables), each row ending by ``share`` of the budget: the
    step must never wait more than 5%."""
    sizes = throughput_input.TOY if toy else throughput_input.InputSizes(**INPUT_FULL)
    corpora: dict[int, throughput_input.Corpus] = {}

    def measure(name: str, path: str | None) -> dict:
        max_len = throughput_input.INPUT_MODELS[name]().data.max_len
        if max_len not in corpora:
            made = throughput_input.Corpus.make(sizes, max_len, next(iter(corpora.values()), None))
            corpora[max_len] = made
        row = throughput_input.measure_input(name, path, corpora[max_len], sizes, INPUT_ROUNDS)
        note = (
            f"{row['path']}: loop/step {row['loop_over_step_median']:.2f}, input wait "
            f"{row['input_wait_share']:.1%}, step {row['step_examples_per_second']:,.0f} ex/s"
        )
        return {
            **row,
            "throughput": row["loop_examples_per_second"],
            "unit": "examples/s",
            "note": note,
        }

    for name, path in INPUT_ROWS:
        rec.row(
            f"input wait {name}, {path or 'no tables'}",
            "float32",
            functools.partial(measure, name, path),
            kind="input",
            share=share,
            batch=sizes.batch_size,
        )
