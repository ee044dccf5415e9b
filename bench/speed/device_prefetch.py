"""Device prefetch on or off: the trainer's loop, input included, side by side.

``Trainer.device_batches`` can put the next batch on the device while a step
runs (``config.device_prefetch``). On an accelerator that hides the host-to-
device copy; on CPU the host is the device, so this measures what it costs
there. Both sides train the I2CE demo model (configs/i2ce_demo.py) on the
shapes world through the real grain pipeline, in alternating rounds.

    python bench/speed/device_prefetch.py [--rounds 7] [--steps 40]
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

# configs/ is used from the clone, not installed: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import jax
import numpy as np

from bench.harness import load_average, ratio_summary, time_rounds
from capsim.tables import format_table
from capsim.train import Trainer
from configs import i2ce_demo
from i2ce_jax import data as i2ce_data
from i2ce_jax import model as i2ce_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=40, help="train steps per round")
    args = parser.parse_args()
    config = i2ce_demo.get_config()
    vocab, train, _, _ = i2ce_data.encoded_corpora(config)
    dataset = i2ce_data.training_batches(config, train).dataset(config)
    loops = {}
    for prefetch in (0, 1):
        side = config.copy_and_resolve_references()
        side.device_prefetch = prefetch
        model = i2ce_model.build_model(side, len(vocab))
        trainer = Trainer(side, model, i2ce_model.make_loss_fn(side))
        batches = trainer.device_batches(iter(dataset))
        loops[f"prefetch {prefetch}"] = (trainer, batches)

    def runner(name: str):
        trainer, batches = loops[name]

        def one_round(index: int) -> None:
            metrics = None
            for _ in range(args.steps):
                batch, _, _ = next(batches)
                metrics = trainer.step(batch)
            jax.block_until_ready((trainer.state, metrics))

        return one_round

    for name in loops:  # compile off the clock
        runner(name)(0)
    load_start = load_average()
    seconds = time_rounds({name: runner(name) for name in loops}, args.rounds)
    summary = ratio_summary(seconds["prefetch 1"], seconds["prefetch 0"])
    rows = [
        {
            "device": jax.devices()[0].device_kind,
            "steps/round": args.steps,
            "off s (median)": float(np.median(seconds["prefetch 0"])),
            "on s (median)": float(np.median(seconds["prefetch 1"])),
            "speed on/off": summary["ratio_median"],
            "min": summary["ratio_min"],
            "max": summary["ratio_max"],
            "rounds": args.rounds,
            "load": f"{load_start:.2f}/{load_average():.2f}",
        }
    ]
    print(f"{platform.processor() or platform.machine()}, jax {jax.__version__}")
    print(format_table(rows, list(rows[0])))


if __name__ == "__main__":
    main()
