"""I2CE's input pipeline on the full caption mixture, against the train step's demand.

    python bench/speed/i2ce_pipeline_scale.py --data_dir ../shared/data [--model research] \
        [--batches 40] [--rounds 5]

Builds the corpus of a packaged model's config (``research``: every caption
source, about 240k captions; ``base``: the redistributable ones), its
length-bucketed grain pipeline and the train step at that model's sizes. Each
round drains ``batches`` batches from a fresh iterator and runs the step on
``batches`` batches built beforehand, in alternating order; the ratio is the
pipeline's examples/s over the step's, per round (median, min, max). At 10 or
more the step never waits for data. Writes the "I2CE input pipeline at scale"
section of bench/RESULTS.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# configs/ is used from the clone, not installed: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse

import numpy as np

from bench.cases.placed import JaxRunner
from bench.harness import (
    load_average,
    machine_facts,
    ratio_cells,
    ratio_summary,
    time_rounds,
    update_section,
)
from capsim.data import glove
from capsim.tables import format_cells
from i2ce_jax import data as i2ce_data
from i2ce_jax import model as i2ce_model
from i2ce_jax.pretrained import recipe

SECTION = "## I2CE input pipeline at scale"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default="../shared/data")
    parser.add_argument("--model", default="research", choices=sorted(recipe.MODELS))
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    data_dir = Path(args.data_dir).resolve()
    config = recipe.get_config(f"model={args.model},data_dir={data_dir}")
    vocab, train, _, _ = i2ce_data.encoded_corpora(config)
    dataset = i2ce_data.training_batches(config, train).dataset(config)
    prebuilt = [batch for _, batch in zip(range(args.batches), iter(dataset), strict=False)]

    init = glove.vectors_for_vocab(config.model.glove, vocab, config.model.embed_dim, seed=0)
    model = i2ce_model.build_model(config, len(vocab), init)
    step = JaxRunner(config, model, i2ce_model.make_loss_fn(config))
    widths = {batch["anchor_ids"].shape[1]: batch for batch in prebuilt}
    step(list(widths.values()))  # compiles each bucket width, off the clock

    def drain(_: int) -> None:
        iterator = iter(dataset)
        for _ in range(args.batches):
            next(iterator)
        iterator.close()

    load_start = load_average()
    seconds = time_rounds({"pipeline": drain, "step": lambda _: step(prebuilt)}, args.rounds)
    load_end = load_average()
    examples = args.batches * config.batch_size
    # ratio_summary(ours, reference) = reference seconds / ours: pipeline speed over the step's
    ratios = ratio_summary(seconds["pipeline"], seconds["step"])
    row = {
        "captions": len(train),
        "pipeline ex/s": examples / float(np.median(seconds["pipeline"])),
        "step ex/s": examples / float(np.median(seconds["step"])),
        **ratios,
        "load": f"{load_start:.2f} / {load_end:.2f}",
    }
    table = format_cells(
        [
            "model",
            "captions",
            "pipeline ex/s",
            "step ex/s",
            "ratio median",
            "min",
            "max",
            "load start / end",
        ],
        [
            [
                args.model,
                f"{row['captions']:,}",
                f"{row['pipeline ex/s']:.0f}",
                f"{row['step ex/s']:.0f}",
                *ratio_cells(row, ".1f"),
                row["load"],
            ]
        ],
    )
    print(table)
    command = " ".join(["python", *sys.argv]).replace(str(data_dir), "../shared/data")
    facts = machine_facts()
    update_section(
        SECTION,
        f"{SECTION}\n\nCommand: `{command}`\n\n"
        f"The `{args.model}` config's training captions, length-bucketed batches of "
        f"{config.batch_size}; {args.rounds} alternating rounds of {args.batches} batches "
        f"(a fresh iterator per round, its start-up included) against the train step on "
        f"{args.batches} batches built beforehand (each width compiled first). Machine: "
        f"{', '.join(f'{k} {v}' for k, v in facts.items())}.\n\n{table}\n",
    )


if __name__ == "__main__":
    main()
