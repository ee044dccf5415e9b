"""The shared training loop: learning, resume, NaN guard, early stopping."""

from __future__ import annotations

import json
import logging
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
from flax import nnx

from capsim.checkpoints import find_model_checkpoint, restore_model
from capsim.data.pipeline import Batches, training_dataset
from capsim.errors import CheckpointError, DataFormatError
from capsim.train import Trainer

TRUE_W = np.array([1.5, -2.0, 0.5], np.float32)


class Regressor(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.linear = nnx.Linear(3, 1, rngs=rngs)
        self.dropout = nnx.Dropout(0.02, rngs=rngs)

    def __call__(self, x):
        return self.linear(self.dropout(x))[:, 0]


INPUTS = np.random.default_rng(0).normal(size=(256, 3)).astype(np.float32)


def make_batch(rows, draws):
    x = INPUTS[rows]
    noise = 0.02 * (draws - 0.5)  # the pipeline's per-example random numbers
    return {"x": x, "y": (x @ TRUE_W + noise).astype(np.float32)}


def mse(model, batch, key):
    del key
    loss = jnp.mean((model(batch["x"]) - batch["y"]) ** 2)
    return loss, {}


def tiny_config(**overrides) -> ml_collections.ConfigDict:
    config = ml_collections.ConfigDict(
        dict(
            seed=0,
            batch_size=16,
            num_steps=60,
            log_every=5,
            checkpoint_every=20,
            optimizer=dict(
                learning_rate=0.05, decay_rate=1.0, decay_steps=1000, l2=0.0, clip_norm=0.0
            ),
            early_stopping=dict(metric="dev/neg_mse", mode="max", patience=0),
        )
    )
    config.update(overrides)
    return config


class Periodic:
    """A ``fn(model) -> metrics`` run every ``every`` steps (capsim.train.loop.PeriodicEval)."""

    def __init__(self, fn, every=20):
        self.fn, self.every = fn, every

    def during_training(self, model, step, last):
        return self.fn(model)


def make_table_batch(rows, draws):
    """``make_batch`` with its inputs as rows of a table (capsim.data.device_tables)."""
    return {"x_rows": rows.astype(np.int32), "y": make_batch(rows, draws)["y"]}


def run(config, workdir, evaluate=None, every=20, workers=0, tables=False):
    """Trains the regressor; with ``tables``, its inputs are a table whose rows the batch
    indexes, gathered where ``config.device_tables`` puts them (tests/test_device_tables.py)."""
    model = Regressor(nnx.Rngs(0))
    batches = Batches(len(INPUTS), make_table_batch, tables={"x": INPUTS})
    trainer = Trainer(config, model, mse, tables=batches.tables if tables else None)
    batch_fn = batches.batch_fn(trainer.tables_on_device) if tables else make_batch
    data = training_dataset(
        len(INPUTS), batch_fn, global_batch_size=config.batch_size, seed=1, workers=workers
    )
    periodic = Periodic(evaluate, every) if evaluate else None
    return model, trainer.fit(workdir, data, periodic)


def dev_eval(model):
    x = np.random.default_rng(99).normal(size=(64, 3)).astype(np.float32)
    return {"dev/neg_mse": -float(jnp.mean((model(x) - x @ TRUE_W) ** 2))}


def test_loss_falls_and_files_are_written(tmp_path):
    _, result = run(tiny_config(), tmp_path, dev_eval)
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["train/loss"] for r in records if "train/loss" in r]
    assert losses[-1] < 0.1 * losses[0]
    assert result.step == 60 and result.best_metric > -0.05
    assert json.loads((tmp_path / "config.json").read_text())["batch_size"] == 16
    assert list((tmp_path / "tensorboard").iterdir())
    assert find_model_checkpoint(tmp_path).name == "checkpoints"


def test_resume_continues_exactly(tmp_path):
    _, full = run(tiny_config(), tmp_path / "full")
    run(tiny_config(num_steps=40), tmp_path / "split")
    _, resumed = run(tiny_config(), tmp_path / "split")
    assert resumed.step == 60
    np.testing.assert_allclose(resumed.last_loss, full.last_loss, rtol=1e-6)


def _losses(workdir: Path) -> list[float]:
    rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    return [r["train/loss"] for r in rows if "train/loss" in r]


def test_grain_workers_give_the_same_batches_in_the_same_order_and_resume(tmp_path):
    """Two grain worker processes, stopped at step 40 and resumed, train exactly like none."""
    run(tiny_config(), tmp_path / "in_process")
    run(tiny_config(num_steps=40), tmp_path / "workers", workers=2)
    _, resumed = run(tiny_config(), tmp_path / "workers", workers=2)
    assert resumed.step == 60
    np.testing.assert_allclose(
        _losses(tmp_path / "workers"), _losses(tmp_path / "in_process"), rtol=1e-6
    )


def test_resume_after_a_kill_logs_each_step_once(tmp_path):
    run(tiny_config(num_steps=40), tmp_path)  # checkpoints at 20 and 40
    metrics = tmp_path / "metrics.jsonl"
    # A kill after logging step 45 but before the checkpoint at 60 leaves rows past 40.
    with metrics.open("a") as log:
        log.write(json.dumps({"step": 45, "train/loss": 123.0}) + "\n")
    _, resumed = run(tiny_config(), tmp_path)
    steps = [json.loads(line)["step"] for line in metrics.read_text().splitlines()]
    loss_steps = [
        s
        for s, line in zip(steps, metrics.read_text().splitlines(), strict=True)
        if "train/loss" in line
    ]
    assert resumed.step == 60
    assert loss_steps == list(range(5, 61, 5))  # every logged step once, none twice
    assert 123.0 not in [
        json.loads(line).get("train/loss") for line in metrics.read_text().splitlines()
    ]


def test_a_metrics_row_cut_short_by_a_kill_is_dropped_on_resume(tmp_path):
    run(tiny_config(num_steps=40), tmp_path)
    metrics = tmp_path / "metrics.jsonl"
    with metrics.open("a") as log:
        log.write('{"step": 41, "train/lo')  # SIGKILL in the middle of a write
    run(tiny_config(), tmp_path)
    assert [json.loads(line)["step"] for line in metrics.read_text().splitlines()] == list(
        range(5, 61, 5)
    )


def test_a_damaged_metrics_row_is_an_error_naming_file_and_line(tmp_path):
    run(tiny_config(num_steps=20), tmp_path)
    metrics = tmp_path / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text(lines[0] + "garbage\n" + "".join(lines[1:]))
    with pytest.raises(DataFormatError, match=r"metrics.jsonl:2"):
        run(tiny_config(), tmp_path)


def _damage(checkpoint: Path, how: str) -> None:
    """Garbage bytes, a file cut short, or a missing folder in a saved checkpoint."""
    data_files = sorted(
        p for p in (checkpoint / "model").rglob("*") if p.is_file() and p.stat().st_size
    )
    if how == "garbage":
        for path in data_files:
            path.write_bytes(b"\x00garbage" * 7)
    elif how == "truncated":
        for path in data_files:
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])
    else:
        shutil.rmtree(checkpoint / "model")


@pytest.mark.parametrize("how", ["garbage", "truncated", "missing"])
def test_damaged_newest_checkpoint_falls_back_to_the_previous(tmp_path, how, caplog):
    _, full = run(tiny_config(), tmp_path / "full")
    run(tiny_config(num_steps=40), tmp_path / "split")  # checkpoints at 20 and 40
    _damage(tmp_path / "split" / "checkpoints" / "40", how)
    with caplog.at_level(logging.WARNING):
        _, resumed = run(tiny_config(), tmp_path / "split")
    assert "checkpoint step 40" in caplog.text and "restored step 20" in caplog.text
    assert resumed.step == 60
    np.testing.assert_allclose(resumed.last_loss, full.last_loss, rtol=1e-6)


def test_no_usable_checkpoint_is_an_error_naming_the_folder(tmp_path):
    run(tiny_config(num_steps=40), tmp_path)
    for step in ("20", "40"):
        _damage(tmp_path / "checkpoints" / step, "missing")
    with pytest.raises(CheckpointError, match=r"checkpoints holds checkpoints but none is usable"):
        run(tiny_config(), tmp_path)


def test_frozen_parameters_keep_their_initial_values(tmp_path):
    config = tiny_config()
    config.optimizer.frozen = ("bias",)
    initial = Regressor(nnx.Rngs(0))
    model, result = run(config, tmp_path)
    np.testing.assert_array_equal(model.linear.bias[...], initial.linear.bias[...])
    assert not np.allclose(model.linear.kernel[...], initial.linear.kernel[...])
    assert result.last_loss < 0.1


def test_restore_into_fresh_model(tmp_path):
    model, _ = run(tiny_config(), tmp_path, dev_eval)
    fresh = Regressor(nnx.Rngs(123))
    restore_model(tmp_path, fresh)
    np.testing.assert_allclose(fresh.linear.kernel[...], model.linear.kernel[...], atol=0.2)


def test_nan_guard_names_step_and_checkpoint(tmp_path):
    config = tiny_config(
        optimizer=dict(learning_rate=1e30, decay_rate=1.0, decay_steps=1, l2=0.0, clip_norm=0.0)
    )
    with pytest.raises(FloatingPointError, match=r"at step \d+.*checkpoint"):
        run(config, tmp_path)


def test_early_stopping(tmp_path):
    calls = iter(range(100))

    def worsening(model):
        return {"dev/neg_mse": -float(next(calls))}

    config = tiny_config(num_steps=200)
    config.early_stopping.patience = 2
    _, result = run(config, tmp_path, worsening, every=10)
    assert result.stopped_early and result.step == 30


def test_missing_checkpoint_is_clear(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        find_model_checkpoint(tmp_path / "nope")
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        find_model_checkpoint(tmp_path)


PREEMPTED_RUN = """
import sys
sys.path.insert(0, "tests")
from test_trainer import run, tiny_config
run(tiny_config(num_steps=int(sys.argv[2]), checkpoint_every=10**9, log_every=1), sys.argv[1])
"""


def test_sigterm_saves_a_checkpoint_exits_0_and_the_run_resumes(tmp_path):
    repo = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-c", PREEMPTED_RUN, str(tmp_path), "1000000"]
    process = subprocess.Popen(command, cwd=repo, stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while not (metrics.exists() and metrics.read_text().count("\n") >= 20):
        assert time.monotonic() < deadline and process.poll() is None, "the run did not start"
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    assert "preempted (SIGTERM); saved a checkpoint at step" in stderr
    saved = int(stderr.split("checkpoint at step ")[1].split()[0])
    assert (tmp_path / "checkpoints" / str(saved)).is_dir()
    _, resumed = run(tiny_config(num_steps=saved + 10, checkpoint_every=10**9), tmp_path)
    assert resumed.step == saved + 10


def test_config_files_find_their_helpers_from_any_directory(tmp_path):
    from capsim.train.entry import config_roots

    argv = ["prog", "--config=/clone/configs/coco_bow.py:loss=rank", "--workdir=/w"]
    assert config_roots(argv) == [str(Path("/clone").resolve())]
    assert config_roots(["prog", "--workdir=/w"]) == []


def test_workdir_of_another_model_is_refused_unless_allowed(tmp_path):
    from capsim.errors import CapsimError
    from capsim.train.preflight import check_workdir

    config = tiny_config()
    config.model = ml_collections.ConfigDict(dict(hidden_dim=8))
    config.data = ml_collections.ConfigDict(dict(data_dir="/a", max_len=20))
    check_workdir(config, tmp_path)
    (tmp_path / "config.json").write_text(config.to_json_best_effort())
    moved = ml_collections.ConfigDict(config.to_dict())
    moved.data.data_dir = "/elsewhere"  # data may move: not a different model
    moved.model.dtype = "bfloat16"  # compute dtype: the float32 checkpoints still fit
    moved.model.logits_dtype = "bfloat16"  # I2CE's step levers, new since some workdirs
    moved.model.decoder_unroll = 4
    check_workdir(moved, tmp_path)
    other = ml_collections.ConfigDict(config.to_dict())
    other.model.hidden_dim = 16
    with pytest.raises(
        CapsimError,
        match=r"config\.json is from a run with other settings for \['model\.hidden_dim'\]",
    ):
        check_workdir(other, tmp_path)
    other.allow_config_change = True
    check_workdir(other, tmp_path)


def test_unwritable_workdir_is_a_clear_error(tmp_path, monkeypatch):
    from capsim.errors import CapsimError
    from capsim.train import preflight

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(preflight.tempfile, "NamedTemporaryFile", refuse)  # root ignores chmod
    with pytest.raises(CapsimError, match=r"workdir .* is not writable \(Permission denied\)"):
        preflight.check_workdir(tiny_config(), tmp_path / "run")


def test_batch_that_does_not_split_over_the_devices_is_a_clear_error(monkeypatch):
    from capsim import mesh as mesh_lib

    monkeypatch.setattr(mesh_lib.jax, "device_count", lambda: 8)
    with pytest.raises(ValueError, match=r"batch size 12 does not divide over 8 devices"):
        mesh_lib.local_batch_size(12)


def test_device_prefetch_trains_the_same_batches_and_resumes_exactly(tmp_path):
    """A batch placed on the device ahead of its step changes nothing: the same losses,
    and the checkpointed iterator state is the trained batch's, not the prefetched one."""
    _, plain = run(tiny_config(device_prefetch=0), tmp_path / "plain")
    run(tiny_config(device_prefetch=2, num_steps=40), tmp_path / "ahead")
    _, ahead = run(tiny_config(device_prefetch=2), tmp_path / "ahead")
    np.testing.assert_allclose(_losses(tmp_path / "ahead"), _losses(tmp_path / "plain"), rtol=1e-6)
    assert ahead.step == plain.step == 60


def test_profile_steps_write_a_trace_into_the_workdir(tmp_path):
    run(tiny_config(profile_steps="3:5"), tmp_path)
    assert list((tmp_path / "profile").rglob("*.xplane.pb"))
    with pytest.raises(ValueError, match=r"profile_steps='5:3'"):
        run(tiny_config(profile_steps="5:3"), tmp_path / "bad")


def test_each_step_draws_the_key_of_its_count_made_inside_the_step():
    """The loss's key is fold_in(key(seed), steps done), made in the compiled step: the
    keys a run drew from the host before, with no host work a step."""
    import jax

    from capsim.train.trainer import step_key

    def loss_with_draw(model, batch, key):
        loss, _ = mse(model, batch, key)
        return loss, {"draw": jax.random.uniform(key)}

    config = tiny_config(seed=7)
    trainer = Trainer(config, Regressor(nnx.Rngs(0)), loss_with_draw)
    batch = trainer.global_batch(make_batch(np.arange(16), np.zeros(16, np.float32)))
    draws = [float(trainer.step(batch)["draw"]) for _ in range(3)]
    expected = [
        float(jax.random.uniform(jax.random.fold_in(jax.random.key(7), n))) for n in range(3)
    ]
    assert draws == expected
    assert len(set(draws)) == 3
    assert draws[2] == float(jax.random.uniform(step_key(7, 2)))
