"""Training and scoring throughput against reference implementations, side by side in one run.

    python bench/throughput.py [--steps 10] [--rounds 5] [--warmup 3]
        [--only train|score|input|members]

Training (bench/throughput_tables/training.py): examples/s of the library's real
jit-compiled step (capsim.train.Trainer's step over the data mesh) against a PyTorch
twin of the same model (bench/cases/torch_reference.py: same sizes, same parameter
count, same loss, same optimizer, started from the same weights) for I2CE at the
paper's scale and at the default config, and VTFN's text towers. Both consume
the same synthetic batches; each of ``--rounds`` rounds runs ``--steps`` steps
per side, alternating who goes first, after warmup (JAX compilation excluded).
Each row also has its hand-counted FLOPs per step (bench/cases/flops.py), the FLOP/s
that gives, and its share of the machine's matmul peak measured in the same run.
The paper-scale I2CE step is broken into its parts, and its checkpoint stall
timed (bench/throughput_tables/i2ce_step.py). The trainers' input pipelines are timed too
(bench/throughput_tables/pipeline.py), on a COCO-sized synthetic corpus, against a
per-example design and against the fastest training step.
Scoring (bench/throughput_tables/scoring.py): captions/s of I2CEScorer.compute_score and of
capsim's Bleu(4)+CiderD against pycocoevalcap's Bleu(4)+Cider on the same Flickr8k-Expert candidates
with 5 references each, using the packaged I2CE model; pycocoevalcap both as
users run it (Java PTBTokenizer first) and on pre-tokenised text.
Input wait (``--only input``, bench/throughput_tables/input_wait.py; not part of "all"): a real
training loop's examples/s against its bare step's at batch ``--input_batch``, VTFN
with its feature table on the device and gathered on the host, and I2CE;
``--toy`` runs it at tiny sizes in seconds and writes nothing.
Members (``--only members``, bench/throughput_tables/members.py; not part of "all"): K
members of a grid (1, 8, 32) as one vmapped step against the compiled step in turn, each
model at demo and paper sizes at batch 128; writes bench/results/members.json and the
"## Members of a grid" section (``--toy``: demo sizes, 1 and 8 members, nothing written).

Every ratio is taken per round and reported as median, min and max, with the
load average around it. Writes bench/results/throughput.json and the
"## Throughput" and "## Scoring throughput" sections of bench/RESULTS.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

# configs/ and bench/ are used from the clone, not installed: make its root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import dataclasses
import importlib.util
import json

from bench import harness
from bench.cases import flops
from bench.cases.catalogue import (
    IMAGE_DIM,
    MAX_TOKENS,
    MIN_TOKENS,
    PAPER,
    TRAINING_MODELS,
    VOCAB_SIZE,
    Sizes,
)
from bench.harness import update_section
from bench.throughput_tables import input_wait as throughput_input
from bench.throughput_tables import members
from bench.throughput_tables.metric_suite import measure_suite, suite_available
from bench.throughput_tables.pipeline import COCO_IMAGES, measure_pipeline, pipeline_table
from bench.throughput_tables.scorer_parts import (
    details_section,
    measure_first_call,
    measure_scorer_parts,
)
from bench.throughput_tables.scoring import (
    RESULTS_JSON,
    measure_scoring,
    scoring_table,
    write_scoring_results,
)
from i2ce_jax import pretrained
from i2ce_jax.scorer import I2CEScorer

SECTION = "## Throughput"
MEMBERS_SECTION = "## Members of a grid (issue 53)"
TORCH_MISSING = (
    "the training rows need torch: pip install -e '.[bench]' (or --only score, input or members)"
)


def write_training_results(
    command: str,
    settings: dict,
    machine: dict,
    peak: dict,
    rows: list[dict],
    parts: list[dict],
    stall: dict,
    pipeline_rows: list[dict],
    tables: tuple[str, str],
) -> str:
    """The "## Throughput" section, and the training, part and pipeline rows of throughput.json;
    ``tables`` are the training rows' and the parts' tables, as text."""
    table, parts_text = tables
    fastest = max(rows, key=lambda r: r["ours"])
    pipeline_notes = "\n".join(f"- `{r['name']}`: {r['description']}." for r in pipeline_rows)
    params = "; ".join(
        f"{r['name']} {r['jax_parameters']:,} / {r['torch_parameters']:,}" for r in rows
    )
    losses = "; ".join(
        f"{r['name']} {r['jax_initial_loss']:.5f} / {r['torch_initial_loss']:.5f}" for r in rows
    )
    m, st = machine, settings
    section = f"""{SECTION}

Command: `{command}`

- Machine: {m["cpu_cores"]} CPU cores ({m["platform"]}), shared with other jobs, so only
  figures measured side by side mean anything. JAX {m["jax"]} on {m["jax_devices"]} device;
  torch {m["torch"]} with {m["torch_threads"]} threads, OMP_WAIT_POLICY={m["omp_wait_policy"]}
  (see the script).
- Peak: the fastest of 10 {flops.PEAK_MATMUL_SIZE}³ float32 matmuls in JAX,
  measured in this run before and after the rows: {peak["before"] / 1e9:.0f} and
  {peak["after"] / 1e9:.0f} GFLOP/s; the share of peak uses the higher.
- Training: {st["rounds"]} alternating rounds of {st["steps"]} steps per side after
  {st["warmup"]} warmup steps (JAX compilation excluded), batch {st["batch_size"]}. Ratio =
  JAX / PyTorch examples/s per round (above 1: JAX is faster); median, min and max over the
  rounds, with the load average before and after the row. JAX runs the library's jit-compiled
  `capsim.train.Trainer`'s step over the data mesh; the reference is the PyTorch twin in
  `bench/cases/torch_reference.py` (same sizes, weights, loss and optimizer; packed RNNs, so PAD steps
  are skipped there).
- Batches: synthetic captions of {MIN_TOKENS}-{MAX_TOKENS} tokens padded to the config's max_len,
  vocabulary {VOCAB_SIZE}, {IMAGE_DIM}-d features; `I2CE-paper-scale` is the paper's scale (every
  caption {PAPER.tokens} tokens, embed {PAPER.embed}, hidden {PAPER.hidden}, vocabulary
  {PAPER.vocab:,}, margin branch) and `I2CE-default`
  the default config (configs/i2ce_coco_margin.py sizes, vocabulary cap 6,000).
- FLOPs: matrix products counted by hand from the shapes (bench/cases/flops.py), forward and backward;
  JAX GFLOP/s = FLOPs per step x JAX steps/s (median round).

{table}

Where the paper-scale I2CE step spends its time: each part alone, forward and backward, on the
same batch in both frameworks ({st["part_steps"]} step(s) per round, {st["rounds"]} alternating
rounds; `measure_i2ce_parts`). The readout is the [B*{PAPER.tokens - 1}, {PAPER.hidden}] x
[{PAPER.hidden}, {PAPER.vocab:,}] vocabulary product with its NLL; the decoder GRU is the masked
scan over {PAPER.tokens - 1} steps. Shares of peak use the same
in-run peak as the table above.

{parts_text}

Checkpoint saves (`measure_checkpoint_stall`): saving the paper-scale I2CE state
({stall["bytes"] / 1e6:.0f} MB: model, Adam moments, grain iterator) holds the training loop
{stall["ours"] * 1e3:.0f} ms now that the files are written in the background, against
{stall["reference"] * 1e3:.0f} ms when the write is awaited: {stall["ratio_median"]:.1f}x less
(min {stall["ratio_min"]:.1f}, max {stall["ratio_max"]:.1f}, {stall["rounds"]} alternating
rounds, load {stall["load_start"]:.2f} / {stall["load_end"]:.2f}).

Parameters, JAX / torch: {params}.
Loss on the first batch from the same weights, JAX / torch: {losses}.

Input pipelines (`capsim.data.pipeline.training_dataset` with the trainers' `make_batch_fn`s) on
a synthetic corpus of COCO's size ({COCO_IMAGES:,} images, 5 captions each; VTFN with their
{IMAGE_DIM}-d float32 features), {st["pipeline_batches"]} batches of {st["batch_size"]} per
round, {st["rounds"]} alternating rounds. The `-pipeline` rows set batch gathering against the
previous design (one Python call per example, then grain's batch); the ArrayRecord row reads the
features from an ArrayRecord store written once to a temporary directory
(`vtfn_jax.features.ArrayRecordFeatures`) against the same pipeline reading them from memory.
Headroom = our examples/s over the fastest training step's JAX examples/s in the table above
({fastest["name"]}, {fastest["ours"]:.0f}).

{pipeline_notes}

{pipeline_table(pipeline_rows)}
"""
    update_section(SECTION, section)
    RESULTS_JSON.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(RESULTS_JSON.read_text()) if RESULTS_JSON.exists() else {"rows": []}
    kept = [r for r in previous["rows"] if r.get("what") == "score"]
    previous.update(
        command=command,
        settings=settings,
        machine=machine,
        matmul_peak=peak,
        rows=rows + parts + [stall] + pipeline_rows + kept,
    )
    RESULTS_JSON.write_text(json.dumps(previous, indent=2) + "\n")
    return table


def measure_input_wait(args: argparse.Namespace, command: str) -> None:
    """``--only input``: the rows of bench/throughput_tables/input_wait.py, written unless ``--toy``."""
    sizes = throughput_input.TOY if args.toy else throughput_input.InputSizes()
    sizes = dataclasses.replace(sizes, batch_size=args.input_batch if not args.toy else 32)
    rounds = throughput_input.TOY_ROUNDS if args.toy else args.rounds

    def report(row: dict) -> None:
        print(
            f"{row['name']} ({row['path']}): loop {row['loop_examples_per_second']:.0f} ex/s, "
            f"step {row['step_examples_per_second']:.0f} ex/s, loop/step "
            f"{row['loop_over_step_median']:.3f}, input wait {row['input_wait_share']:.1%}",
            flush=True,
        )

    rows = throughput_input.measure_input_rows(sizes, rounds, report=report)
    if args.toy:
        print(throughput_input.input_table(rows) + "\n(toy sizes: nothing written)")
        return
    print(throughput_input.write_input_results(command, rows, harness.machine_facts()))


def measure_members(args: argparse.Namespace, command: str) -> None:
    """``--only members``: bench/throughput_tables/members.py's rows, written unless ``--toy``."""
    counts, sizes = ((1, 8), ("demo",)) if args.toy else (members.MEMBER_COUNTS, members.SIZES)
    rows = members.member_rows(counts, rounds=args.rounds, sizes=tuple(sizes), report=print)
    table = members.members_table(rows)
    print(table)
    if args.toy:
        print("(toy sizes: nothing written)")
        return
    (harness.RESULTS_DIR / "members.json").write_text(json.dumps(rows, indent=2) + "\n")
    what = members.__doc__.split("\n\n")[0]
    load = f"Load {harness.load_average():.2f} at the end; {args.rounds} alternating rounds."
    update_section(
        MEMBERS_SECTION, f"{MEMBERS_SECTION}\n\nCommand: `{command}`\n\n{what} {load}\n\n{table}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per round per side")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=harness.ROUNDS, help="alternating rounds")
    parser.add_argument("--pipeline_batches", type=int, default=300, help="batches per round")
    parser.add_argument("--part_steps", type=int, default=1, help="paper-scale parts: steps/round")
    parser.add_argument("--model", default="base", help="packaged I2CE model to score with")
    parser.add_argument(
        "--only", choices=("all", "train", "score", "input", "members"), default="all"
    )
    parser.add_argument("--input_batch", type=int, default=1024, help="--only input: batch")
    parser.add_argument("--toy", action="store_true", help="--only input/members at tiny sizes")
    parser.add_argument(
        "--golden", type=Path, default=harness.GOLDEN_FILE, help="scoring candidates"
    )
    args = parser.parse_args()
    command = ("python bench/throughput.py " + " ".join(sys.argv[1:])).strip()
    if args.only == "input":
        measure_input_wait(args, command)
        return
    if args.only == "members":
        measure_members(args, command)
        return
    if args.only != "train":
        if not args.golden.is_file():
            parser.error(
                f"{args.golden} does not exist (pycocoevalcap golden rows: see shared/data)"
            )
        gts, res = harness.load_golden_pairs(args.golden, limit=None)
        scorer = I2CEScorer.pretrained(args.model)
        rows = measure_scoring(gts, res, rounds=args.rounds, scorer=scorer)
        print(scoring_table(rows), flush=True)
        peak = flops.measured_matmul_peak(repeats=10)
        measured = {"parts": measure_scorer_parts(scorer, gts, res, rounds=args.rounds, peak=peak)}
        if args.model == pretrained.DEFAULT and suite_available():
            measured["suite"] = measure_suite(gts, res, rounds=args.rounds)
            measured["first_call"] = measure_first_call(args.golden, rounds=args.rounds)
        details = details_section(
            measured["parts"], measured.get("suite"), measured.get("first_call")
        )
        print(details, flush=True)
        write_scoring_results(command, rows, args.model, details, measured)
    if args.only != "score":
        measure_training_rows(args, command)


def measure_training_rows(args: argparse.Namespace, command: str) -> None:
    """The training rows against their PyTorch twins, the I2CE step's parts, the checkpoint
    stall and the input pipelines; the "## Throughput" section."""
    if importlib.util.find_spec("torch") is None:
        raise SystemExit(TORCH_MISSING)
    from bench.throughput_tables import i2ce_step, training  # import torch: the bench extra

    training.use_every_core()
    machine = harness.machine_facts()
    sizes = Sizes(batch_size=args.batch_size)
    before = flops.measured_matmul_peak(repeats=10)
    rows = []
    for name in TRAINING_MODELS:
        row = training.measure_training(
            name, steps=args.steps, warmup=args.warmup, sizes=sizes, rounds=args.rounds
        )
        print(
            f"{name}: ratio {row['ratio_median']:.2f} ({row['ratio_min']:.2f}-"
            f"{row['ratio_max']:.2f}), {row['flops_per_s'] / 1e9:.1f} GFLOP/s; load "
            f"{row['load_start']:.2f}/{row['load_end']:.2f}",
            flush=True,
        )
        rows.append(row)
    parts = i2ce_step.measure_i2ce_parts(steps=args.part_steps, rounds=args.rounds, sizes=sizes)
    stall = i2ce_step.measure_checkpoint_stall(rounds=args.rounds, sizes=sizes)
    after = flops.measured_matmul_peak(repeats=10)
    peak = {"before": before, "after": after, "flops_per_s": max(before, after)}
    for row in rows + parts:
        row["peak_fraction"] = row["flops_per_s"] / peak["flops_per_s"]
    for row in parts:
        row["torch_peak_fraction"] = row["torch_flops_per_s"] / peak["flops_per_s"]
    fastest = max(row["ours"] for row in rows)
    pipeline_rows = measure_pipeline(
        batch_size=args.batch_size, batches=args.pipeline_batches, rounds=args.rounds
    )
    for row in pipeline_rows:
        row["headroom"] = row["ours"] / fastest
        print(f"{row['name']}: {row['ours']:.0f} ex/s, {row['headroom']:.1f}x the fastest step")
    settings = {
        k: v
        for k, v in vars(args).items()
        if k in ("steps", "warmup", "batch_size", "rounds", "pipeline_batches", "part_steps")
    }
    tables = (training.training_table(rows), i2ce_step.parts_table(parts))
    print(
        write_training_results(
            command, settings, machine, peak, rows, parts, stall, pipeline_rows, tables
        )
    )


if __name__ == "__main__":
    main()
