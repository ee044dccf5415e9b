"""bench/accelerator_check.py on CPU at toy sizes, its row-by-row file and time budget, the
PyTorch twins on the device they are given, the peak table, and bench/cases/flops.py against
hand-computed totals and XLA's own count."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import import_extra
from flax import nnx

from bench import accelerator_check
from bench.accelerator import levers as accelerator_levers
from bench.accelerator import members as accelerator_members
from bench.accelerator import rows as accelerator_rows
from bench.accelerator import training as accelerator_training
from bench.cases import catalogue, flops
from capsim import text
from configs import coco_bow, i2ce_coco_margin
from i2ce_jax import model as i2ce_model
from vtfn_jax import model as vtfn_model

REPO = Path(__file__).resolve().parents[1]
SWEPT = catalogue.SWEPT
TWINS = tuple(catalogue.CASES)
HAS_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("accelerator_check")
    out = folder / "check.json"
    command = [sys.executable, "bench/accelerator_check.py", "--toy", "--out", str(out)]
    proc = subprocess.run(
        [*command, "--cache_dir", str(folder / "cache"), "--budget_s", "900"],
        cwd=REPO,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout, json.loads(out.read_text())


@pytest.mark.slow  # the toy run: sweep, twins, scoring in a process (35 s; 65 s on a busy CPU)
def test_toy_run_prints_each_row_and_writes_every_row(toy_run):
    stdout, result = toy_run
    assert "| check | dtype | batch | status | throughput |" in stdout
    assert result["scale"] == "toy" and result["device"]["platform"] == "cpu"
    assert result["complete"] and result["seconds"] < result["budget_s"] == 900
    assert Path(result["compilation_cache"]).name == "cache"  # --cache_dir
    for dtype in accelerator_check.DTYPES:
        assert result["peaks"][dtype]["source"].startswith("measured")
        assert result["peaks"][dtype]["tflops"] > 0
    rows = {(row["check"], row["dtype"], row.get("batch")): row for row in result["rows"]}
    assert len(rows) == len(result["rows"])
    sweep = {
        (f"{name} training", dtype, batch)
        for name in SWEPT
        for dtype in accelerator_check.DTYPES
        for batch in accelerator_check.TOY.batches
    }
    summaries = {(f"{name} training bfloat16/float32", "bfloat16/float32", None) for name in SWEPT}
    twins = {(f"{name} JAX/PyTorch", "float32", 8) for name in TWINS}
    inputs = {key for key in rows if key[0].startswith("input wait")}
    levers = {("I2CE-paper-scale parts", d, 8) for d in accelerator_check.DTYPES}
    levers |= {(f"I2CE lever: {name}", d, 8) for d, name in accelerator_levers.LEVER_ROWS}
    levers |= {(f"{name} host key", "float32", 8) for name in TWINS}
    levers.add(("batch placement", "float32", 8))
    members = {
        (f"{name} members x{count}", "float32", 128)
        for name, counts in accelerator_members.TOY_MEMBER_ROWS.items()
        for count in counts
    }
    assert set(rows) == (
        sweep | summaries | levers | twins | inputs | members | {("I2CE scoring", "float32", None)}
    )
    for key in members:
        row = rows[key]
        assert row["status"] == "ok", row
        assert row["packed_examples_per_second"] > 0 and row["sequential_examples_per_second"] > 0
        assert row["mode"] in ("vmapped", "in_turn") and row["throughput"] > 0
    for key in levers:
        row = rows[key]
        assert row["status"] == "ok", row
        if key[0] == "batch placement":
            assert all(r["ratio_median"] > 0 for r in row["placement"]), row
        else:
            assert row["throughput" if "parts" in key[0] else "ratio_median"] > 0
    assert "lever/shipped" in stdout and "key in step/on host" in stdout
    # VTFN-GRU and VTFN-BOW on device tables, I2CE, VTFN-BOW on the host: torch or not
    assert len(inputs) == 4, inputs
    for key in inputs:
        row = rows[key]
        assert row["status"] == "ok", row
        assert row["loop_examples_per_second"] > 0 and 0 <= row["input_wait_share"] < 1
    for key in sweep:
        row = rows[key]
        assert row["status"] == "ok", row
        assert row["throughput"] > 0 and 0 < row["mfu"] < 1
        assert row["peak_tflops"] == result["peaks"][key[1]]["tflops"]
        assert np.isfinite(row["loss"]) and row["steps"] == accelerator_check.TOY.steps
        assert row["flops_per_step"] == sum(row["flops_by_part"].values())
        assert row["xla_flops"] > 0
        assert f"[accelerator_check] {key[0]} ({key[1]}, batch {key[2]}): ok" in stdout
    for check, dtype, _ in summaries:
        ratios = rows[check, dtype, None]["ratios"]
        assert set(ratios) == {str(b) for b in accelerator_check.TOY.batches}
        assert all(ratio > 0 for ratio in ratios.values())
    for key in twins:
        row = rows[key]
        if not HAS_TORCH:
            assert row["status"] == "skipped" and "torch is not installed" in row["note"]
            continue
        assert row["status"] == "ok", row
        assert row["torch_device"] == "cpu" and row["rounds"] == accelerator_check.TOY.twin_rounds
        assert row["throughput"] > 0 and row["torch_throughput"] > 0
        assert row["ratio_min"] <= row["ratio_median"] <= row["ratio_max"]
        assert row["torch_initial_loss"] == pytest.approx(row["jax_initial_loss"], rel=1e-4)
    scoring = rows[("I2CE scoring", "float32", None)]
    assert scoring["status"] == "ok" and scoring["unit"] == "captions/s"
    assert scoring["throughput"] > 0


def _recorder(tmp_path, seconds: float = 100.0, spent: float = 0.0, **estimates):
    budget = accelerator_rows.Budget(seconds, time.perf_counter() - spent, estimates)
    out = tmp_path / "rows.json"
    return accelerator_rows.Recorder(out, {"scale": "test"}, budget), out


def _not_here() -> dict:
    raise accelerator_rows.Skipped("not here")


def test_the_file_is_rewritten_after_every_row(tmp_path, capsys):
    recorder, out = _recorder(tmp_path, training=1.0)
    assert json.loads(out.read_text())["rows"] == []

    def second() -> dict:  # while a row runs, the rows before it are on disk
        on_disk = json.loads(out.read_text())
        assert [row["check"] for row in on_disk["rows"]] == ["first"]
        assert on_disk["complete"] is False
        raise ValueError("broken")

    recorder.row("first", "float32", lambda: {"throughput": 2.0}, kind="training", batch=8)
    recorder.row("second", "float32", second, kind="training")
    recorder.row("third", "float32", _not_here, kind="training")
    written = json.loads(out.read_text())
    assert [row["status"] for row in written["rows"]] == ["ok", "failed", "skipped"]
    assert written["rows"][0]["batch"] == 8 and written["rows"][1]["error"] == "ValueError: broken"
    assert not written["complete"]
    recorder.finish()
    assert json.loads(out.read_text())["complete"] is True
    assert [p.name for p in tmp_path.iterdir()] == ["rows.json"]  # no temporary file left
    printed = capsys.readouterr().out
    assert "[accelerator_check] first (float32, batch 8): ok, 2 " in printed
    assert "second (float32): failed" in printed


def test_a_row_that_would_overrun_its_section_is_skipped_and_says_why(tmp_path):
    recorder, out = _recorder(tmp_path, seconds=100.0, spent=50.0, training=10.0, demo=60.0)
    ran = []
    recorder.row("late", "float32", lambda: ran.append(1) or {}, kind="training", share=0.55)
    recorder.row("long", "float32", lambda: ran.append(2) or {}, kind="demo")
    recorder.row("fits", "float32", lambda: ran.append(3) or {}, kind="training", batch=4)
    assert ran == [3]
    rows = json.loads(out.read_text())["rows"]
    assert [row["status"] for row in rows] == ["skipped", "skipped", "ok"]
    assert rows[0]["note"].startswith("time budget: 50 s spent, about 10 s needed")
    assert "section ends at 55 s of --budget_s 100" in rows[0]["note"]
    assert "about 60 s needed" in rows[1]["note"]
    # Once a row of a kind has run, its estimate is the longest one measured.
    assert recorder.budget.estimate("training") == rows[2]["seconds"] < 1.0
    recorder.budget.record("training", 7.0)
    recorder.budget.record("training", 3.0)
    assert recorder.budget.estimate("training") == 7.0


def test_dtype_ratios_pair_the_rows_of_one_batch():
    def row(dtype, batch, speed, status="ok"):
        return {
            "check": "m training",
            "dtype": dtype,
            "batch": batch,
            "throughput": speed,
            "status": status,
        }

    rows = [row("float32", 8, 100.0), row("bfloat16", 8, 50.0), row("float32", 16, 10.0)]
    rows.append(row("bfloat16", 16, 30.0, status="failed"))
    assert accelerator_training.dtype_ratios(rows, "m training") == {"8": 0.5}


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


def _captions(batch: int, tokens: int, vocab: int) -> tuple[np.ndarray, np.ndarray]:
    """Ids and mask of random captions of half to all of ``tokens`` (the catalogue's)."""
    (captions,) = catalogue.caption_batches(
        np.random.default_rng(0),
        count=1,
        batch=batch,
        max_len=tokens,
        vocab=vocab,
        lengths=(tokens // 2, tokens),
    )
    return captions["anchor_ids"], captions["anchor_mask"]


def _i2ce(tokens: int = 8, vocab: int = 3000):
    config = i2ce_coco_margin.get_config("embed=32,hidden=128,batch=16")
    config.data.max_len = tokens
    ids, mask = _captions(16, tokens, vocab)
    batch = {"anchor_ids": ids, "anchor_mask": mask, "group": jnp.arange(16) // 2}
    model = i2ce_model.build_model(config, vocab)
    return model, i2ce_model.make_loss_fn(config), batch, flops.i2ce_step_flops(config, vocab)


def _vtfn(encoder: str, vocab: int = 300, image_dim: int = 256):
    """With the caption-pivot term: two encoded captions, frozen image features."""
    config = importlib.import_module(f"configs.coco_{encoder}").get_config("dim=64,pivot=1.0")
    config.batch_size, config.data.max_len = 16, 12
    ids, mask = _captions(16, 12, vocab)
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


@pytest.mark.bench
@pytest.mark.parametrize("device", ["meta", "cuda"])
def test_twins_compute_on_the_device_they_are_given(device):
    """On "meta" a tensor made on the CPU by mistake fails the loss; "cuda" needs a GPU."""
    torch = import_extra("torch")
    from bench.cases import torch_reference

    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("torch sees no GPU")
    sim = torch.rand(6, 6, device=device)
    positive = torch.eye(6, dtype=torch.bool, device=device)
    perm = torch.randperm(6)  # from a CPU generator, as TorchTrainer's
    assert torch_reference.pearson_pair_loss(sim, positive, perm).device.type == device
    assert torch_reference.margin_mean_loss(sim, positive, 0.2).device.type == device
    names = ["VTFN-BOW"] if device == "meta" else list(TWINS)  # packed RNNs need real lengths
    for name in names:
        case = catalogue.CASES[name](catalogue.TOY, "float32", 8)
        if case.image_dim is None:
            twin = torch_reference.I2CEReference(case.config, case.vocab_size, device=device)
        else:
            twin = torch_reference.VTFNReference(
                case.config, case.vocab_size, case.image_dim, device=device
            )
        assert {p.device.type for p in twin.parameters()} == {device}
        trainer = torch_reference.TorchTrainer(twin, case.config)
        assert trainer.device.type == device
        batch = trainer.to_device(case.batches[0])
        assert {t.device.type for t in batch.values()} == {device}
        loss = twin.loss(batch, torch.randperm(8))
        assert loss.device.type == device
        if device != "meta":
            assert np.isfinite(float(trainer.step(case.batches[0])))
