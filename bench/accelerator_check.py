"""Readiness check on whatever ``jax.devices()`` gives, in one lease: training speed, PyTorch, demos.

    python bench/accelerator_check.py [--toy] [--budget_s 210] [--steps 20] [--out FILE]
                                      [--data_dir ../shared/data] [--cache_dir DIR]

Meant to end within 4 minutes on one GPU, start-up included (estimated from the
figures of an earlier, longer run; not yet timed there whole): every row first checks
that it fits in what is left of its section's share of ``--budget_s`` (default 210 s,
counted from the start of ``main``; sections in this order, ending by 38%, 52%, 64%,
74%, 80%, 84% and 100% of it), its expected time being ``ESTIMATES`` until a row of its kind has
run, then the longest such row; a row that does not fit is recorded as skipped, with the
reason. Each row is printed as it ends and the JSON (``--out``) is rewritten after it (a
temporary file renamed over it; ``"complete": false`` until the end). Rows:

- **batch sweep**: the library's training step on bench/cases/catalogue.py's cases, I2CE
  at paper scale (20 tokens, embed 300, hidden 512, vocabulary 10,000, margin branch) and
  VTFN-GRU (24 tokens, N = 128, 2048-d image features) at batch 128, 1,024 and 4,096, in float32 and
  bfloat16 (``config.model.dtype``): examples/s, and MFU from the hand FLOP count of
  bench/cases/flops.py against the device's peak for that dtype (``KNOWN_PEAKS`` by
  ``device_kind``; on CPU or an unknown device, the measured rate of a 2048³ float32
  matmul, marked "measured"). XLA's own count (``cost_analysis``, scan bodies once)
  is recorded beside the hand count's ``as_xla_counts``. Then one summary row per
  model: bfloat16 / float32 examples/s at each batch.
- **parts and levers** (bench/accelerator/levers.py, bench/speed/step_levers.py): the
  paper-scale I2CE step at batch 1,024, its readout and decoder GRU alone against the
  whole step, in both dtypes; each ``config.model`` lever alone against the shipped
  step (logits in bfloat16, the decoder unrolled 2, 4 or 20 steps; ratio, median of
  3 alternating rounds); per model at batch 128, the step with its key made inside
  against the same step plus the host ``fold_in`` it used to need; and a batch of 1,024
  placed on the device in one call against a call per array.
- **PyTorch twins** (bench/accelerator/twins.py): I2CE at paper scale, VTFN-GRU and
  VTFN-BOW at batch 128 and 1,024, float32: the JAX step's examples/s against its
  twin's (bench/cases/torch_reference.py, on CUDA where torch sees a GPU), in 5 alternating
  rounds of 10 steps a side, and the JAX / PyTorch ratio (median, min, max); the first
  batch of each model also compares both initial losses. Skipped rows where torch is
  not installed.
- **input wait** (bench/accelerator/input_wait.py): the training loop, grain included, against
  its bare step (loop/step, the share of time waiting on input) at batch 1,024.
- **members** (bench/accelerator/members.py): a grid's members at batch 128 as one
  vmapped step against the compiled step in turn, VTFN-GRU at 1, 8 and 32 members, VTFN-BOW
  and I2CE at 1 and 32 (the goal: 32 VTFN-GRU members at 10x one member's examples/s).
- **scoring**: captions/s of ``I2CEScorer.pretrained()`` on the Flickr8k-Expert pairs
  (``DATA_DIR/flickr8k``), or on synthetic captions when those files are absent,
  which the row says.
- **demos**: each demo config (``:runlocal``, 5 steps) trained and evaluated end to end
  through ``train_and_evaluate``, in float32, then I2CE's and the GRU's at bfloat16.
  The evaluations embed in batches of 8 sentences (``DEMO_EVAL_BATCH``): one compiled
  shape per caption length instead of about 30, the same vectors. Not in ``--toy``.

Training steps are timed with ``block_until_ready`` after warm-up steps (the
compilation is done before); batches are placed on the devices before timing, so
host input is not measured; a row short of time times fewer steps (3 at least).
JAX's persistent compilation cache is on (``capsim.cache``, or ``--cache_dir``): the
twins' float32 steps load the sweep's programs, and a second run on the same machine
loads all of them instead of compiling. A check that fails becomes a failed row and
the script exits 1 after the rest. On a multi-host TPU slice, run it on every worker
(process 0's clock decides what runs); the demos and twins are then skipped. ``--toy`` shrinks every size (the test runs it
on CPU: sweep batches 8 and 16, the twins on CPU at batch 8 when torch is installed).
"""

from __future__ import annotations

import sys
from pathlib import Path

# configs/ is used from the clone, not installed: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import dataclasses
import functools
import importlib
import importlib.util
import platform
import tempfile
import time
from collections.abc import Mapping
from unittest import mock

import flax
import jax
import numpy as np

from bench.accelerator import training as accelerator_training
from bench.accelerator.input_wait import input_wait
from bench.accelerator.levers import levers
from bench.accelerator.members import members
from bench.accelerator.rows import Budget, Recorder, Skipped, rows_table
from bench.accelerator.training import DTYPES, Scale, device_peaks, dtype_ratios, time_training
from bench.cases.catalogue import CASES, SWEPT
from capsim import mesh as mesh_lib
from capsim import text
from capsim.cache import MIN_COMPILE_SECONDS, use_compilation_cache
from capsim.eval import judgment_harness, judgment_sets
from i2ce_jax import train as i2ce_train
from i2ce_jax.scorer import I2CEScorer
from vtfn_jax import data as vtfn_data
from vtfn_jax import train as vtfn_train

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "bench" / "results" / "accelerator_check.json"
DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"
DEFAULT_BUDGET_S = 210.0

# Priority order: each architecture once in float32, then the sequence models in bfloat16. The
# first is among the longest, so that the budget's estimate for the next ones is its time.
DEMOS = (
    ("demo_gru", "float32"),
    ("i2ce_demo", "float32"),
    ("demo_bow", "float32"),
    ("demo_cnn", "float32"),
    ("demo_lstm", "float32"),
    ("i2ce_demo", "bfloat16"),
    ("demo_gru", "bfloat16"),
)
DEMO_EVAL_BATCH = 8  # capsim.embed.MIN_ROWS: every batch of a bucket has one shape
# Each section ends by this share of the budget (cumulative; time a section leaves unused
# goes to the next ones).
SHARES = {
    "sweep": 0.38,
    "levers": 0.52,
    "twins": 0.64,
    "input": 0.74,
    "members": 0.80,
    "scoring": 0.84,
    "demos": 1.0,
}
# Seconds a row of each kind is expected to take on one GPU, compilation included, until
# one has run (then the longest measured): see the report in issue 48's thread.
# Parts and levers: a guess (a sweep row's compilation and a few seconds of rounds).
ESTIMATES = {
    "training": 6.0,
    "parts": 8.0,
    "lever": 8.0,
    "host key": 4.0,
    "placement": 3.0,
    "twin": 8.0,
    "input": 12.0,
    "members": 10.0,
    "scoring": 15.0,
    "demo": 12.0,
}

FULL = dataclasses.replace(accelerator_training.FULL, demos=DEMOS)
TOY = accelerator_training.TOY


# --------------------------------------------------------------------------- demos, scoring
def run_demo(name: str, dtype: str, steps: int) -> dict:
    """``train_and_evaluate`` of a demo config at ``:runlocal`` for ``steps`` steps, its
    evaluations embedding DEMO_EVAL_BATCH sentences a batch."""
    if jax.process_count() > 1:
        raise Skipped("several processes would need a shared workdir: run the demos on one host")
    config = importlib.import_module(f"configs.{name}").get_config("runlocal")
    config.num_steps = steps
    config.model.dtype = dtype
    if name.startswith("i2ce"):
        trainer = i2ce_train
        small = functools.partial(I2CEScorer, batch_size=DEMO_EVAL_BATCH)
        batches = mock.patch.object(i2ce_train, "I2CEScorer", small)
    else:
        trainer = vtfn_train
        batches = mock.patch.object(vtfn_data, "DEFAULT_BATCH_SIZE", DEMO_EVAL_BATCH)
    with batches, tempfile.TemporaryDirectory(prefix=f"accelerator_check_{name}_") as workdir:
        summary = trainer.train_and_evaluate(config, workdir)
    train = summary.get("train", summary)  # VTFN nests its training summary
    return {
        "throughput": train["train_examples_per_second"],
        "unit": "examples/s",
        "note": f"{train['steps']} steps (compilation included), trained and evaluated",
    }


def scoring_pairs(data_dir: Path, limit: int | None, vocab: text.Vocab) -> tuple[dict, dict, str]:
    """(gts, res, what they are): Flickr8k-Expert's pairs, else synthetic captions."""
    folder = data_dir / "flickr8k"
    if (folder / "ExpertAnnotations.txt").is_file():
        judged = judgment_sets.load_set("flickr8k_expert", folder)
        pairs = judgment_harness.group_judgments(judged)
        gts, res, source = pairs.gts, pairs.res, "Flickr8k-Expert pairs"
    else:
        rng = np.random.default_rng(0)
        words = vocab.itos[len(text.SPECIALS) :]

        def caption() -> str:
            return " ".join(rng.choice(words, rng.integers(6, 16)))

        count = limit or 5000
        gts = {str(i): [caption() for _ in range(5)] for i in range(count)}
        res = {str(i): [caption()] for i in range(count)}
        source = f"SYNTHETIC captions, 5 references each ({folder} has no ExpertAnnotations.txt)"
    keys = list(res)[:limit]
    return {k: gts[k] for k in keys}, {k: res[k] for k in keys}, source


def time_scoring(data_dir: Path, limit: int | None) -> dict:
    """Captions/s of the packaged scorer, timed on a second pass (the first compiles)."""
    scorer = I2CEScorer.pretrained()
    gts, res, source = scoring_pairs(data_dir, limit, scorer.vocab)
    scorer.compute_score(gts, res)
    began = time.perf_counter()
    scorer.compute_score(gts, res)
    seconds = time.perf_counter() - began
    return {
        "throughput": len(res) / seconds,
        "unit": "captions/s",
        "note": f"{len(res)} candidates with their references; {source}",
    }


# --------------------------------------------------------------------------- sections
def sweep(rec: Recorder, scale: Scale, steps: int, peaks: Mapping[str, dict]) -> None:
    """Each swept model at each batch in both dtypes, then its bfloat16 / float32 row."""
    share = SHARES["sweep"]
    left = functools.partial(rec.budget.left, share)
    for name in SWEPT:
        for batch in scale.batches:
            for dtype in DTYPES:
                rec.row(
                    f"{name} training",
                    dtype,
                    lambda n=name, d=dtype, b=batch: time_training(
                        CASES[n](scale.sizes, d, b), steps, scale.warmup, peaks[d]["tflops"], left
                    ),
                    kind="training",
                    share=share,
                    batch=batch,
                )
        ratios = dtype_ratios(rec.rows, f"{name} training")
        rec.add(
            {
                "check": f"{name} training bfloat16/float32",
                "dtype": "bfloat16/float32",
                "status": "ok" if ratios else "skipped",
                "ratios": ratios,
                "seconds": 0.0,
                "note": "bfloat16 / float32 examples/s: "
                + (", ".join(f"batch {b}: {r:.2f}x" for b, r in ratios.items()) or "no pair ran"),
            }
        )


def twins(rec: Recorder, scale: Scale) -> None:
    """The JAX step against each PyTorch twin, float32, at ``scale.twin_batches``."""
    reason = None
    if importlib.util.find_spec("torch") is None:
        reason = "torch is not installed (pip install -e '.[bench]')"
    elif jax.process_count() > 1:
        reason = "the twins run on one host"
    if reason is None:
        from bench.accelerator import twins as accelerator_twins  # imports torch

        device = accelerator_twins.twin_device()
    share = SHARES["twins"]
    left = functools.partial(rec.budget.left, share)
    for name in CASES:
        for index, batch in enumerate(scale.twin_batches):
            check, dtype = f"{name} JAX/PyTorch", "float32"
            if reason is not None:
                rec.skip(check, dtype, reason, batch=batch)
                continue
            rec.row(
                check,
                dtype,
                lambda n=name, b=batch, first=index == 0: accelerator_twins.measure_twin(
                    CASES[n](scale.sizes, "float32", b),
                    device,
                    steps=scale.twin_steps,
                    warmup=scale.warmup,
                    rounds=scale.twin_rounds,
                    check_loss=first,
                    seconds_left=left,
                ),
                kind="twin",
                share=share,
                batch=batch,
            )


def run_checks(rec: Recorder, scale: Scale, steps: int, data_dir: Path, peaks, toy: bool) -> None:
    sweep(rec, scale, steps, peaks)
    levers(rec, scale.sizes, toy, share=SHARES["levers"])
    twins(rec, scale)
    input_wait(rec, toy, share=SHARES["input"])
    members(rec, scale.sizes, toy, share=SHARES["members"])
    rec.row(
        "I2CE scoring",
        "float32",
        lambda: time_scoring(data_dir, scale.scoring_pairs),
        kind="scoring",
        share=SHARES["scoring"],
    )
    for name, dtype in scale.demos:
        rec.row(
            f"demo {name}",
            dtype,
            lambda n=name, d=dtype: run_demo(n, d, scale.demo_steps),
            kind="demo",
            share=SHARES["demos"],
        )


# --------------------------------------------------------------------------- the run
def main(argv: list[str] | None = None) -> int:
    began = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--toy", action="store_true", help="tiny sizes (tests, smoke runs)")
    parser.add_argument("--steps", type=int, help="timed training steps (default 20; toy 3)")
    parser.add_argument("--budget_s", type=float, default=DEFAULT_BUDGET_S, help="seconds")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results")
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR, help="has flickr8k/")
    parser.add_argument("--cache_dir", type=Path, help="JAX's compilation cache (else capsim's)")
    args = parser.parse_args(argv)
    scale = TOY if args.toy else FULL
    steps = args.steps or scale.steps
    if args.cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(args.cache_dir))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    else:
        use_compilation_cache()  # capsim's, unless JAX's own cache directory is set
    mesh_lib.maybe_initialize_distributed()  # on a multi-host TPU slice every worker runs this
    device = jax.devices()[0]
    budget = Budget(args.budget_s, began, dict(ESTIMATES))
    result = {
        "command": " ".join(["python bench/accelerator_check.py", *sys.argv[1:]]),
        "scale": "toy" if args.toy else "full",
        "steps": steps,
        "warmup": scale.warmup,
        "compilation_cache": jax.config.jax_compilation_cache_dir,
        "device": {
            "platform": device.platform,
            "device_kind": device.device_kind,
            "device_count": jax.device_count(),
            "process_count": jax.process_count(),
            "jax": jax.__version__,
            "flax": flax.__version__,
            "host": platform.node(),
        },
    }
    result["peaks"] = peaks = device_peaks(device.device_kind)
    recorder = Recorder(args.out, result, budget, write=jax.process_index() == 0)
    run_checks(recorder, scale, steps, args.data_dir, peaks, args.toy)
    recorder.finish()
    failed = [
        f"{row['check']} ({row['dtype']})" for row in recorder.rows if row["status"] == "failed"
    ]
    if jax.process_index() == 0:
        report(result, args.out, failed)
    return 1 if failed else 0


def report(result: dict, out: Path, failed: list[str]) -> None:
    """Prints the table (the JSON is already written)."""
    device, peaks = result["device"], result["peaks"]
    sources = dict.fromkeys(peak["source"] for peak in peaks.values())
    print(
        f"\n{device['device_count']} x {device['device_kind']} ({device['platform']}); MFU against the "
        f"peak of all devices together, per dtype ({'; '.join(sources)})"
    )
    print(rows_table(result["rows"]))
    skipped = sum(row["status"] == "skipped" for row in result["rows"])
    print(f"{result['seconds']:.0f} s of a {result['budget_s']:.0f} s budget; {skipped} skipped")
    print(f"JSON: {out}")
    if failed:
        print("FAILED: " + ", ".join(failed))


if __name__ == "__main__":
    sys.exit(main())
