"""Readiness check on whatever ``jax.devices()`` gives: demos, paper-scale MFU, scoring speed.

    python bench/accelerator_check.py [--toy] [--steps 50] [--out FILE] [--data_dir ../shared/data]

One run prints one table and writes the same rows as JSON (``--out``):

- **demos**: each demo config (``:runlocal``, a few steps) trained and evaluated
  end to end through ``train_and_evaluate``, at float32, and the two sequence
  models again at bfloat16 (``config.model.dtype``). Not in ``--toy`` runs.
- **I2CE training at paper scale** (batch 128, 20 tokens, embed 300, hidden 512,
  vocabulary 10,000, margin branch) in float32 and bfloat16: examples/s, and MFU
  from the hand FLOP count of bench/flops.py against the device's peak for that
  dtype (``KNOWN_PEAKS`` by ``device_kind``; on CPU or an unknown device, the
  measured rate of a 2048³ float32 matmul, marked "measured"). XLA's own count
  (``cost_analysis``, scan bodies once) is recorded beside the hand count's
  ``as_xla_counts`` as a cross-check.
- **scoring**: captions/s of ``I2CEScorer.pretrained()`` on the Flickr8k-Expert
  pairs (``DATA_DIR/flickr8k``), or on synthetic captions when those files are
  absent, which the row says.
- **VTFN-GRU training** examples/s (and MFU) in both dtypes (batch 128, 24
  tokens, N = 128, 2048-d image features).

Training steps are the library's ``capsim.train.Trainer`` step over the data mesh (every
device, the batch split across them), timed with ``block_until_ready`` after
warm-up steps (the first compiles); batches are placed on the devices before
timing, so host input is not measured. A check that fails becomes a failed row
and the script exits 1 after writing the rest. On a multi-host TPU slice, run it
on every worker (it joins them with jax.distributed); the demos are then skipped.
``--toy`` shrinks every size and skips the demos (the test runs it on CPU). A
full run is meant to take a few minutes on one GPU; it was written without one.
"""

from __future__ import annotations

import sys
from pathlib import Path

# configs/ is used from the clone, not installed: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import importlib
import json
import platform
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping

import flax
import jax
import numpy as np

from bench.accelerator_training import (
    DTYPES,
    Scale,
    device_peaks,
    i2ce_case,
    time_training,
    vtfn_gru_case,
)
from capsim import mesh as mesh_lib
from capsim import text
from capsim.eval import judgment_harness, judgment_sets
from i2ce_jax import train as i2ce_train
from i2ce_jax.scorer import I2CEScorer
from vtfn_jax import train as vtfn_train

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "bench" / "results" / "accelerator_check.json"
DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"

DEMOS = (
    ("demo_bow", "float32"),
    ("demo_gru", "float32"),
    ("demo_lstm", "float32"),
    ("demo_cnn", "float32"),
    ("i2ce_demo", "float32"),
    ("demo_gru", "bfloat16"),
    ("i2ce_demo", "bfloat16"),
)

FULL = Scale(
    batch=128,
    tokens=20,
    embed=300,
    hidden=512,
    vocab=10_000,
    vtfn_dim=128,
    vtfn_tokens=24,
    image_dim=2048,
    demos=DEMOS,
    demo_steps=10,
    scoring_pairs=None,
    steps=50,
    warmup=3,
)
TOY = Scale(
    batch=16,
    tokens=8,
    embed=32,
    hidden=64,
    vocab=500,
    vtfn_dim=32,
    vtfn_tokens=8,
    image_dim=64,
    demos=(),
    demo_steps=2,
    scoring_pairs=100,
    steps=3,
    warmup=1,
)


# --------------------------------------------------------------------------- demos, scoring
class Skipped(Exception):
    """A check that cannot run here; its row says why."""


def run_demo(name: str, dtype: str, steps: int) -> dict:
    """``train_and_evaluate`` of a demo config at ``:runlocal`` for ``steps`` steps."""
    if jax.process_count() > 1:
        raise Skipped("several processes would need a shared workdir: run the demos on one host")
    config = importlib.import_module(f"configs.{name}").get_config("runlocal")
    config.num_steps = steps
    config.model.dtype = dtype
    trainer = i2ce_train if name.startswith("i2ce") else vtfn_train
    with tempfile.TemporaryDirectory(prefix=f"accelerator_check_{name}_") as workdir:
        summary = trainer.train_and_evaluate(config, workdir)
    train = summary.get("train", summary)  # VTFN nests its training summary
    return {
        "throughput": train["train_examples_per_second"],
        "unit": "examples/s",
        "note": f"{train['steps']} steps, trained and evaluated",
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


# --------------------------------------------------------------------------- the run
def guarded(check: str, dtype: str, measure: Callable[[], dict]) -> dict:
    """One row: what ``measure`` returns, or a failed row holding the error."""
    began = time.perf_counter()
    try:
        row = {"status": "ok", **measure()}
    except Skipped as why:
        row = {"status": "skipped", "note": str(why)}
    except Exception as error:  # a failed check must not hide the others
        traceback.print_exc()
        row = {"status": "failed", "error": f"{type(error).__name__}: {error}"}
    print(f"[accelerator_check] {check} ({dtype}): {row['status']}", flush=True)
    return {"check": check, "dtype": dtype, "seconds": time.perf_counter() - began, **row}


def run_checks(scale: Scale, steps: int, data_dir: Path, peaks: Mapping[str, dict]) -> list[dict]:
    rows = [
        guarded(f"demo {name}", dtype, lambda n=name, d=dtype: run_demo(n, d, scale.demo_steps))
        for name, dtype in scale.demos
    ]
    for label, make_case in (("I2CE training", i2ce_case), ("VTFN-GRU training", vtfn_gru_case)):
        for dtype in DTYPES:
            rows.append(
                guarded(
                    label,
                    dtype,
                    lambda m=make_case, d=dtype: time_training(
                        m(scale, d), steps, scale.warmup, peaks[d]["tflops"]
                    ),
                )
            )
    rows.append(
        guarded("I2CE scoring", "float32", lambda: time_scoring(data_dir, scale.scoring_pairs))
    )
    return rows


def _cell(row: Mapping, key: str, spec: str) -> str:
    value = row.get(key)
    return "" if value is None else format(value, spec)


def table(rows: list[dict]) -> str:
    lines = [
        "| check | dtype | status | throughput | unit | step ms | TFLOP/s | MFU | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        note = row.get("error") or row.get("note", "")
        lines.append(
            f"| {row['check']} | {row['dtype']} | {row['status']} | {_cell(row, 'throughput', '.1f')} "
            f"| {row.get('unit', '')} | {_cell(row, 'step_ms', '.2f')} | {_cell(row, 'tflops', '.3g')} "
            f"| {_cell(row, 'mfu', '.2%')} | {note} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--toy", action="store_true", help="tiny sizes (tests, smoke runs)")
    parser.add_argument("--steps", type=int, help="timed training steps (default 50; toy 3)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results")
    parser.add_argument("--data_dir", type=Path, default=DEFAULT_DATA_DIR, help="has flickr8k/")
    args = parser.parse_args(argv)
    scale = TOY if args.toy else FULL
    steps = args.steps or scale.steps
    began = time.perf_counter()
    mesh_lib.maybe_initialize_distributed()  # on a multi-host TPU slice every worker runs this
    device = jax.devices()[0]
    peaks = device_peaks(device.device_kind)
    rows = run_checks(scale, steps, args.data_dir, peaks)
    result = {
        "command": " ".join(["python bench/accelerator_check.py", *sys.argv[1:]]),
        "scale": "toy" if args.toy else "full",
        "steps": steps,
        "warmup": scale.warmup,
        "device": {
            "platform": device.platform,
            "device_kind": device.device_kind,
            "device_count": jax.device_count(),
            "process_count": jax.process_count(),
            "jax": jax.__version__,
            "flax": flax.__version__,
            "host": platform.node(),
        },
        "peaks": peaks,
        "rows": rows,
        "seconds": time.perf_counter() - began,
    }
    failed = [row["check"] + f" ({row['dtype']})" for row in rows if row["status"] == "failed"]
    if jax.process_index() == 0:
        report(result, args.out, failed)
    return 1 if failed else 0


def report(result: dict, out: Path, failed: list[str]) -> None:
    """Writes the JSON and prints the table."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    device, peaks = result["device"], result["peaks"]
    sources = dict.fromkeys(peak["source"] for peak in peaks.values())
    print(
        f"\n{device['device_count']} x {device['device_kind']} ({device['platform']}); MFU against the "
        f"peak of all devices together, per dtype ({'; '.join(sources)})"
    )
    print(table(result["rows"]))
    print(f"{result['seconds']:.0f} s; JSON: {out}")
    if failed:
        print("FAILED: " + ", ".join(failed))


if __name__ == "__main__":
    sys.exit(main())
