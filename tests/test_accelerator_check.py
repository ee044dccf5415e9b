"""bench/accelerator_check.py on CPU at toy sizes, the peak table, and bench/flops.py
against hand-computed totals and XLA's own count."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from bench import accelerator_check, accelerator_training, flops
from capsim import text
from configs import coco_bow, i2ce_coco_margin
from i2ce_jax import model as i2ce_model
from vtfn_jax import model as vtfn_model

REPO = Path(__file__).resolve().parents[1]
TRAINING_CHECKS = ("I2CE training", "VTFN-GRU training")


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("accelerator_check") / "check.json"
    proc = subprocess.run(
        [sys.executable, "bench/accelerator_check.py", "--toy", "--out", str(out)],
        cwd=REPO,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, json.loads(out.read_text())


@pytest.mark.slow  # the bench's toy run: demos, scoring and steps in a process (26 s)
def test_toy_run_prints_the_table_and_writes_every_row(toy_run):
    stdout, result = toy_run
    assert "| check | dtype | status | throughput |" in stdout
    assert result["scale"] == "toy" and result["device"]["platform"] == "cpu"
    for dtype in accelerator_check.DTYPES:
        assert result["peaks"][dtype]["source"].startswith("measured")
        assert result["peaks"][dtype]["tflops"] > 0
    rows = {(row["check"], row["dtype"]): row for row in result["rows"]}
    expected = {(c, d) for c in TRAINING_CHECKS for d in accelerator_check.DTYPES}
    assert expected | {("I2CE scoring", "float32")} == set(rows)
    for (check, dtype), row in rows.items():
        assert row["status"] == "ok", row
        assert row["throughput"] > 0
        assert f"| {check} | {dtype} | ok |" in stdout
    for key in expected:
        row = rows[key]
        assert 0 < row["mfu"] < 1
        assert row["peak_tflops"] == result["peaks"][key[1]]["tflops"]
        assert np.isfinite(row["loss"])
        assert row["flops_per_step"] == sum(row["flops_by_part"].values())
        assert row["xla_flops"] > 0
    scoring = rows[("I2CE scoring", "float32")]
    assert scoring["unit"] == "captions/s"


def test_scoring_falls_back_to_synthetic_captions_and_says_so(tmp_path):
    vocab = text.Vocab([*text.SPECIALS, "a", "dog", "runs", "on", "grass"])
    gts, res, source = accelerator_check.scoring_pairs(tmp_path, 7, vocab)
    assert source.startswith("SYNTHETIC") and str(tmp_path / "flickr8k") in source
    assert list(gts) == list(res) and len(res) == 7
    assert all(len(refs) == 5 and len(res[k]) == 1 for k, refs in gts.items())
    assert set(res["0"][0].split()) <= {"a", "dog", "runs", "on", "grass"}


@pytest.mark.parametrize(
    ("device_kind", "name"),
    [
        ("NVIDIA H100 80GB HBM3", "H100/H200 SXM"),
        ("NVIDIA H200", "H100/H200 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("Tesla V100-SXM2-16GB", "V100"),
        ("TPU v4", "TPU v4"),
        ("TPU v5 lite", "TPU v5e"),
        ("TPU v5", "TPU v5p"),
        ("TPU v6 lite", "TPU v6e"),
    ],
)
def test_known_peaks_by_device_kind(device_kind, name):
    assert accelerator_training.known_peak(device_kind).name == name


def test_unknown_device_has_no_table_peak():
    assert accelerator_training.known_peak("cpu") is None
    assert accelerator_training.known_peak("Some Future Accelerator") is None


def test_paper_scale_i2ce_step_flops():
    config = i2ce_coco_margin.get_config()
    assert (config.batch_size, config.data.max_len) == (128, 20)
    assert (config.model.embed_dim, config.model.hidden_dim) == (300, 512)
    count = flops.i2ce_step_flops(config, vocab_size=10_000)
    training = {k: flops.TRAINING_FACTOR * v / 1e9 for k, v in count.parts.items()}
    grus = sum(v for k, v in training.items() if k.startswith(("encoder", "decoder")))
    # 3 x 2·B·T·H·V with the decoder's 19 steps; the GRUs 3 x 6·B·T·H·(E + H).
    assert training["readout"] == pytest.approx(3 * 2 * 128 * 19 * 512 * 10_000 / 1e9)
    assert grus == pytest.approx(3 * 6 * 128 * (20 + 19) * 512 * (300 + 512) / 1e9)
    assert count.training / 1e9 == pytest.approx(112.1, abs=0.1)


def _xla_training_flops(model: nnx.Module, loss_fn, batch: dict) -> float:
    """XLA's FLOPs of the loss and its gradient (a train step besides Adam), dropout off."""
    model.eval()
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def loss(params):
        return loss_fn(nnx.merge(graphdef, params, rest), batch, jax.random.key(0))[0]

    return accelerator_training.xla_flops(jax.jit(jax.value_and_grad(loss)).lower(params).compile())


def _i2ce(tokens: int = 8, vocab: int = 3000):
    config = i2ce_coco_margin.get_config("embed=32,hidden=128,batch=16")
    config.data.max_len = tokens
    ids, mask = accelerator_training.caption_batch(np.random.default_rng(0), 16, tokens, vocab)
    batch = {"anchor_ids": ids, "anchor_mask": mask, "group": jnp.arange(16) // 2}
    model = i2ce_model.build_model(config, vocab)
    return model, i2ce_model.make_loss_fn(config), batch, flops.i2ce_step_flops(config, vocab)


def _vtfn(encoder: str, vocab: int = 300, image_dim: int = 256):
    """With the caption-pivot term: two encoded captions, frozen image features."""
    config = importlib.import_module(f"configs.coco_{encoder}").get_config("dim=64,pivot=1.0")
    config.batch_size, config.data.max_len = 16, 12
    ids, mask = accelerator_training.caption_batch(np.random.default_rng(0), 16, 12, vocab)
    batch = {
        "ids": ids,
        "mask": mask,
        "pivot_ids": ids[::-1],
        "pivot_mask": mask[::-1],
        "features": np.ones((16, image_dim), np.float32),
        "group": jnp.arange(16),
    }
    batch = {k: jnp.asarray(v) for k, v in batch.items()}
    model = vtfn_model.build_model(config, vocab, image_dim)
    return model, vtfn_model.make_loss_fn(config), batch, flops.vtfn_step_flops(config, image_dim)


XLA_CASES = {
    "i2ce": _i2ce,  # the readout dominates
    "vtfn_lstm": lambda: _vtfn("lstm"),
    "vtfn_cnn": lambda: _vtfn("cnn"),
}


@pytest.mark.parametrize("case", sorted(XLA_CASES))
def test_hand_count_matches_xla_with_scan_bodies_counted_once(case):
    """XLA counts a scan body once: it matches ``as_xla_counts`` (elementwise ops add a few
    percent; "SAME" convolutions skip a little padding), and falls far short of the true
    per-step count when the recurrence dominates."""
    model, loss_fn, batch, count = XLA_CASES[case]()
    xla = _xla_training_flops(model, loss_fn, batch)
    assert 0.97 * count.as_xla_counts <= xla <= 1.08 * count.as_xla_counts
    if case == "vtfn_lstm":  # both LSTM products run in the loop: 12 steps counted as 1
        assert count.training > 5 * xla


def test_vtfn_image_map_has_no_input_gradient():
    config = coco_bow.get_config("dim=64")
    count = flops.vtfn_step_flops(config, image_dim=2048)
    image_map = flops.matmul_flops(config.batch_size, 2048, 64)
    similarity = flops.matmul_flops(config.batch_size, 64, config.batch_size)
    assert count.training == 2 * image_map + 3 * similarity


def test_readout_forward_and_backward_is_three_products():
    rows, hidden, vocab = 64, 128, 1000  # wide enough that elementwise ops stay under 1%
    readout = nnx.Linear(hidden, vocab, rngs=nnx.Rngs(0))
    graphdef, params = nnx.split(readout)

    def loss(params, x, upstream):  # upstream: a gradient XLA cannot fold into a reduction
        return jnp.sum(nnx.merge(graphdef, params)(x) * upstream)

    # value_and_grad, as a train step: with grad alone the forward product is dead code.
    grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    x, upstream = jnp.ones((rows, hidden)), jnp.ones((rows, vocab))
    xla = accelerator_training.xla_flops(grad.lower(params, x, upstream).compile())
    hand = flops.TRAINING_FACTOR * flops.matmul_flops(rows, hidden, vocab)
    assert xla == pytest.approx(hand, rel=0.01)


@pytest.mark.slow
def test_demo_row_trains_and_evaluates_a_demo():
    row = accelerator_check.run_demo("demo_bow", "bfloat16", steps=2)
    assert row["throughput"] > 0 and row["note"].startswith("2 steps")
