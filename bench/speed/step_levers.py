"""Issue 48 §2: where the paper-scale I2CE step spends its time, and each lever on it alone.

    python bench/speed/step_levers.py [--batch 128] [--rounds 5] [--steps 2] [--toy]
                                [--dtypes float32 bfloat16] [--sections ...] [--out FILE]

Runs on whatever ``jax.devices()`` gives (bench/accelerator_check.py runs the same rows
on an accelerator; both measure with bench/cases/i2ce_levers.py and step_host.py). Prints a table per section, writes ``bench/results/step_levers.json``
after each and, at the end, bench/RESULTS.md's section (neither with ``--toy``):

- **parts**: the readout (vocabulary product and NLL) and the decoder GRU (its masked
  scan), each alone, forward and backward, on activations shaped like the step's, and
  the whole step: ms per step and the share of the whole step, per compute dtype.
- **model levers**: the I2CE step with one ``config.model`` lever changed against the
  shipped step, in alternating rounds: the decoder's time loop unrolled 2, 4 or every
  step (``decoder_unroll``), and in bfloat16 the logits written in bfloat16
  (``logits_dtype``; the matmul still accumulates in float32 on GPUs and TPUs). The
  ratio is lever / shipped examples/s per round (median, min, max), and the first
  step's loss of each is compared with the shipped one's.
- **host key**: each model's ``Trainer.step`` (the loss's key made inside the compiled
  step, capsim.train.trainer.step_key) against the same step plus the
  ``jax.random.fold_in`` on the host that made the key before: what that host round
  trip cost per step. At test sizes, where the step is as short as a GPU's.
- **placement**: a batch put on the devices by capsim.mesh.global_batch, every array in
  one call, against a call per array as before, at ``--input_batch``: I2CE's batch and
  VTFN-GRU's on both input paths (µs a batch, the gain).

Each variant is compiled and run once before the clock starts.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
from collections.abc import Callable, Mapping

import jax

from bench import harness
from bench.cases.catalogue import CASES, PAPER, TOY
from bench.cases.i2ce_levers import measure_levers, measure_parts
from bench.cases.step_host import (
    host_key_table,
    measure_host_key,
    measure_placement,
    placement_table,
)
from bench.harness import machine_facts, ratio_spread
from capsim.tables import format_cells

OUT = harness.RESULTS_DIR / "step_levers.json"


# --------------------------------------------------------------------------- tables
def parts_table(rows: list[dict]) -> str:
    return format_cells(
        ["part", "dtype", "batch", "ms per step", "share of the step"],
        [
            [r["part"], r["dtype"], str(r["batch"]), f"{r['ms']:.2f}", f"{r['share_of_step']:.0%}"]
            for r in rows
        ],
    )


def levers_table(rows: list[dict]) -> str:
    return format_cells(
        ["lever", "dtype", "batch", "lever / shipped (min-max)", "examples/s", "first loss Δ"],
        [
            [
                r["lever"],
                r["dtype"],
                str(r["batch"]),
                ratio_spread(r),
                f"{r['examples_per_second']:,.0f}",
                f"{r['first_loss'] - r['first_loss_shipped']:+.2e}",
            ]
            for r in rows
        ],
    )


SECTIONS = ("parts", "levers", "host_key", "placement")
RESULTS_TITLE = "## Step levers (issue 48 §2)"


def section_tables(key_steps: int) -> dict[str, tuple[str, Callable[[list[dict]], str]]]:
    """Per section, in SECTIONS' order: its title in RESULTS.md and its table."""
    return {
        "parts": ("Where the step's time goes:", parts_table),
        "levers": ("Each lever alone against the shipped step:", levers_table),
        "host_key": (
            f"The loss's key made in the step against the host (test sizes, {key_steps} "
            "steps a round):",
            host_key_table,
        ),
        "placement": (
            f"A batch placed on the devices in one call or a call per array ({key_steps} "
            "batches a round):",
            placement_table,
        ),
    }


def results_section(result: Mapping) -> str:
    """bench/RESULTS.md's section for a run's ``result`` (the JSON this script writes)."""
    args = result["args"]
    command = "python bench/speed/step_levers.py" + "".join(
        f" --{k} {v}" for k, v in (("batch", args["batch"]), ("rounds", args["rounds"]))
    )
    loads = [r["load_average"] for key in SECTIONS for r in result.get(key, [])]
    lines = [
        RESULTS_TITLE,
        "",
        f"Command: `{command}` (writes bench/results/step_levers.json). Device: "
        f"{result['device']}, {result['machine']['cpu_cores']} cores, jax "
        f"{result['machine']['jax']}; load average from {min(min(x) for x in loads):.2f} to "
        f"{max(max(x) for x in loads):.2f}. I2CE at paper scale ({PAPER.tokens} tokens, embed "
        f"{PAPER.embed}, hidden {PAPER.hidden}, vocabulary {PAPER.vocab:,}, margin branch), "
        f"{args['steps']} steps a round, "
        f"{args['rounds']} alternating rounds; ratios are medians (min-max) of the rounds.",
        "",
    ]
    for name, (title, table) in section_tables(args["key_steps"]).items():
        if name in result:
            lines += [title, "", table(result[name]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=128, help="I2CE batch of parts and levers")
    parser.add_argument("--key_batch", type=int, default=8, help="batch of the host-key rows")
    parser.add_argument("--steps", type=int, default=2, help="steps per round per side")
    parser.add_argument("--key_steps", type=int, default=100, help="host-key rows: steps/round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--input_batch", type=int, default=1024, help="placement rows' batch")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--toy", action="store_true", help="tiny sizes (tests); writes nothing")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    scale = TOY if args.toy else PAPER
    result = {
        "machine": machine_facts(),
        "device": jax.devices()[0].device_kind,
        "args": {**vars(args), "out": str(args.out)},
    }

    timing = (args.batch, args.steps, args.rounds)
    # The host-key rows run at test sizes: a step as short as a GPU's shows what the host
    # adds to it, which a CPU step at paper scale (2-90 ms at batch 8) hides.
    measures = {
        "parts": lambda: [r for d in args.dtypes for r in measure_parts(scale, d, *timing)],
        "levers": lambda: [r for d in args.dtypes for r in measure_levers(scale, d, *timing)],
        "host_key": lambda: [
            measure_host_key(TOY, name, args.key_batch, args.key_steps, args.rounds)
            for name in CASES
        ],
        "placement": lambda: measure_placement(
            scale, args.input_batch, args.key_steps, args.rounds
        ),
    }
    tables = section_tables(args.key_steps)
    for name in args.sections:
        result[name] = measures[name]()
        print(tables[name][1](result[name]), end="\n\n", flush=True)
        if not args.toy:  # after each section, so a stopped run keeps what it measured
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    if not args.toy and args.out == OUT:  # another --out is a trial: RESULTS.md stays
        harness.update_section(RESULTS_TITLE, results_section(result))
        print(f"wrote {args.out} and bench/RESULTS.md's section {RESULTS_TITLE!r}")
    return result


if __name__ == "__main__":
    main()
