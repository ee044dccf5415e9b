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
import dataclasses
import importlib
import json
import math
import platform
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping

import flax
import flops  # bench/flops.py: this script's folder is on sys.path
import jax
import ml_collections
import numpy as np
from flax import nnx

from capsim import text
from capsim.eval import judgment_harness
from capsim.train import Trainer
from capsim.train import mesh as mesh_lib
from configs import coco_gru, i2ce_coco_margin
from i2ce_jax import model as i2ce_model
from i2ce_jax import train as i2ce_train
from i2ce_jax.scorer import I2CEScorer
from vtfn_jax import model as vtfn_model
from vtfn_jax import train as vtfn_train

REPO = Path(__file__).resolve().parents[1]
DTYPES = ("float32", "bfloat16")
DEFAULT_OUT = REPO / "bench" / "results" / "accelerator_check.json"
DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"
DISTINCT_BATCHES = 4
MEASURED_MATMUL = 2048
TERA = 1e12


@dataclasses.dataclass(frozen=True)
class Peak:
    """Dense matmul peak of one device in TFLOP/s, per compute dtype.

    ``float32`` is for float32 matmuls at JAX's default precision, which runs
    them as TF32 on A100/H100/H200 and as one bfloat16 pass on TPU.
    """

    name: str
    bfloat16: float
    float32: float


# Substrings of jax's device_kind (lower case) -> peak; the first match wins.
KNOWN_PEAKS: tuple[tuple[tuple[str, ...], Peak], ...] = (
    (("h100 pcie",), Peak("H100 PCIe", 756.0, 378.0)),
    (("h100", "h200", "gh200"), Peak("H100/H200 SXM", 989.0, 494.0)),
    (("a100",), Peak("A100", 312.0, 156.0)),
    # V100 has no bfloat16 tensor cores: 125 is its float16 peak, float32 runs without TF32.
    (("v100",), Peak("V100", 125.0, 15.7)),
    (("v6 lite", "v6e"), Peak("TPU v6e", 918.0, 918.0)),
    (("v5 lite", "v5e"), Peak("TPU v5e", 197.0, 197.0)),
    (("v5p", "tpu v5"), Peak("TPU v5p", 459.0, 459.0)),
    (("tpu v4",), Peak("TPU v4", 275.0, 275.0)),
)

# (demo config, compute dtype): every demo as users run it, the sequence models in bfloat16 too.
DEMOS = (
    ("demo_bow", "float32"),
    ("demo_gru", "float32"),
    ("demo_lstm", "float32"),
    ("demo_cnn", "float32"),
    ("i2ce_demo", "float32"),
    ("demo_gru", "bfloat16"),
    ("i2ce_demo", "bfloat16"),
)


@dataclasses.dataclass(frozen=True)
class Scale:
    """Sizes of one run: the paper's (``FULL``) or tiny ones for tests (``TOY``)."""

    batch: int
    tokens: int
    embed: int
    hidden: int
    vocab: int
    vtfn_dim: int
    vtfn_tokens: int
    image_dim: int
    demos: tuple[tuple[str, str], ...]
    demo_steps: int
    scoring_pairs: int | None  # None: every pair
    steps: int
    warmup: int


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


# --------------------------------------------------------------------------- peaks
def known_peak(device_kind: str) -> Peak | None:
    kind = device_kind.lower()
    return next((peak for names, peak in KNOWN_PEAKS if any(n in kind for n in names)), None)


def device_peaks(device_kind: str) -> dict[str, dict]:
    """Per compute dtype: the peak of all devices together (TFLOP/s) and where it comes from."""
    count = jax.device_count()
    peak = known_peak(device_kind)
    if peak is None:
        rate = flops.measured_matmul_peak(MEASURED_MATMUL, repeats=3) / TERA
        source = f"measured: {MEASURED_MATMUL}³ float32 matmul on {device_kind}"
        return {d: {"tflops": rate * count, "source": source} for d in DTYPES}
    return {
        d: {"tflops": getattr(peak, d) * count, "source": f"table: {peak.name} {d}"} for d in DTYPES
    }


# --------------------------------------------------------------------------- training
def caption_batch(rng: np.random.Generator, batch: int, max_len: int, vocab: int):
    """Padded ids and mask of random captions of max_len/2 to max_len tokens, <S> ... </S>."""
    lengths = rng.integers(max(2, max_len // 2), max_len + 1, batch)
    mask = np.arange(max_len)[None, :] < lengths[:, None]
    words = rng.integers(len(text.SPECIALS), vocab, (batch, max_len))
    ids = np.where(mask, words, text.PAD_ID).astype(np.int32)
    ids[:, 0] = text.BOS_ID
    ids[np.arange(batch), lengths - 1] = text.EOS_ID
    return ids, mask


@dataclasses.dataclass
class TrainingCase:
    """A model, its loss, host batches and its hand FLOP count, ready to time."""

    config: ml_collections.ConfigDict
    model: nnx.Module
    loss_fn: Callable
    batches: list[dict[str, np.ndarray]]
    step_flops: flops.StepFlops
    sizes: str


def i2ce_case(scale: Scale, dtype: str) -> TrainingCase:
    """The paper's dual (margin) branch at ``scale``'s sizes."""
    config = i2ce_coco_margin.get_config(
        f"embed={scale.embed},hidden={scale.hidden},batch={scale.batch}"
    )
    config.data.max_len = scale.tokens
    config.model.dtype = dtype
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(DISTINCT_BATCHES):
        ids, mask = caption_batch(rng, scale.batch, scale.tokens, scale.vocab)
        group = rng.integers(0, scale.batch // 2, scale.batch).astype(np.int32)
        batches.append({"anchor_ids": ids, "anchor_mask": mask, "group": group})
    return TrainingCase(
        config,
        i2ce_model.build_model(config, scale.vocab),
        i2ce_model.make_loss_fn(config),
        batches,
        flops.i2ce_step_flops(config, scale.vocab),
        f"batch {scale.batch}, {scale.tokens} tokens, embed {scale.embed}, hidden "
        f"{scale.hidden}, vocabulary {scale.vocab}, margin branch",
    )


def vtfn_gru_case(scale: Scale, dtype: str) -> TrainingCase:
    """VTFN with the GRU text tower and the Pearson loss, one caption per image."""
    config = coco_gru.get_config(f"dim={scale.vtfn_dim}")
    config.batch_size = scale.batch
    config.data.max_len = scale.vtfn_tokens
    config.model.dtype = dtype
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(DISTINCT_BATCHES):
        ids, mask = caption_batch(rng, scale.batch, scale.vtfn_tokens, scale.vocab)
        features = rng.standard_normal((scale.batch, scale.image_dim), np.float32)
        group = np.arange(scale.batch, dtype=np.int32)
        batches.append({"ids": ids, "mask": mask, "features": features, "group": group})
    return TrainingCase(
        config,
        vtfn_model.build_model(config, scale.vocab, scale.image_dim),
        vtfn_model.make_loss_fn(config),
        batches,
        flops.vtfn_step_flops(config, scale.image_dim),
        f"batch {scale.batch}, {scale.vtfn_tokens} tokens, N = {scale.vtfn_dim}, "
        f"vocabulary {scale.vocab}, {scale.image_dim}-d features, Pearson loss",
    )


def xla_flops(compiled: jax.stages.Compiled) -> float | None:
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost["flops"]) if cost and "flops" in cost else None


def time_training(case: TrainingCase, steps: int, warmup: int, peak_tflops: float) -> dict:
    """Times ``steps`` train steps after ``warmup``; examples/s, TFLOP/s and MFU."""
    trainer = Trainer(case.config, case.model, case.loss_fn)
    state = trainer.state
    share = slice(jax.process_index(), None, jax.process_count())  # this process's rows
    batches = [trainer.global_batch({k: v[share] for k, v in b.items()}) for b in case.batches]
    base = trainer.base_key
    keys = [jax.random.fold_in(base, i) for i in range(warmup + steps)]
    compiled = trainer.train_step.lower(state, batches[0], base).compile()
    for i in range(warmup):
        state, metrics = compiled(state, batches[i % len(batches)], keys[i])
    jax.block_until_ready((state, metrics))
    began = time.perf_counter()
    for i in range(warmup, warmup + steps):
        state, metrics = compiled(state, batches[i % len(batches)], keys[i])
    jax.block_until_ready((state, metrics))
    seconds = (time.perf_counter() - began) / steps
    loss = float(metrics["loss"])
    if not math.isfinite(loss):
        raise FloatingPointError(f"training loss is {loss} after {warmup + steps} steps")
    achieved = case.step_flops.training / seconds / TERA
    return {
        "throughput": case.config.batch_size / seconds,
        "unit": "examples/s",
        "step_ms": seconds * 1e3,
        "loss": loss,
        "flops_per_step": case.step_flops.training,
        "flops_by_part": case.step_flops.training_parts(),
        "tflops": achieved,
        "peak_tflops": peak_tflops,
        "mfu": achieved / peak_tflops,
        "xla_flops": xla_flops(compiled),
        "hand_flops_as_xla_counts": case.step_flops.as_xla_counts,
        "note": case.sizes,
    }


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
        judged = judgment_harness.load_set("flickr8k_expert", folder)
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
