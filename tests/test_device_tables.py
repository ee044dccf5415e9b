"""Device tables (capsim.data.device_tables): indices on the host, rows on the device.

The step sees the batch the host would have built, bit for bit; both paths train to
the same losses; a run stopped and resumed with its tables on the device ends as an
uninterrupted one; 8 devices and 2 processes' shares give the batches of one; "on"
that does not fit stops before training, naming sizes, and "auto" falls back, saying so.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
import test_trainer
from flax import nnx

from capsim import mesh as mesh_lib
from capsim.data import device_tables, pipeline
from capsim.train import Trainer
from configs import baseline_pin_model_a, demo_bow
from vtfn_jax import kinds
from vtfn_jax.baselines import language_models
from vtfn_jax.data import prepare_data

REPO = Path(__file__).resolve().parents[1]


def _config(arg: str = "runlocal", device_tables: str = "auto", **overrides):
    config = demo_bow.get_config(arg)
    config.device_tables = device_tables
    config.update(overrides)
    return config


@pytest.fixture(scope="module")
def data():
    """The shapes world with every caption (so the pivot loss has other captions)."""
    return prepare_data(_config("runlocal,captions=all"))


def _batches(dataset, count: int) -> list[dict]:
    iterator = iter(dataset)
    return [next(iterator) for _ in range(count)]


@pytest.mark.parametrize("pivot", [False, True])
def test_the_step_gathers_the_host_batch_bit_for_bit(data, pivot):
    """The index batch, gathered by the step's own code from replicated tables on the
    mesh, equals grain's host-gathered batch: same keys, dtypes and bytes."""
    config = _config("runlocal,captions=all")
    batches = kinds.training_batches(data.splits["train"], pivot)
    mesh = mesh_lib.make_data_mesh()
    placed = mesh_lib.replicate(dict(batches.tables), mesh)
    gather = jax.jit(device_tables.gather_tables)
    host = _batches(batches.dataset(config, tables_on_device=False), 3)
    indices = _batches(batches.dataset(config, tables_on_device=True), 3)
    for on_host, rows in zip(host, indices, strict=True):
        assert "features" not in rows and rows["features_rows"].dtype == np.int32
        assert rows["features_rows"].nbytes * 100 < on_host["features"].nbytes  # what travels
        on_device = jax.device_get(gather(placed, mesh_lib.global_batch(rows, mesh)))
        assert sorted(on_device) == sorted(on_host)
        for key, value in on_host.items():
            assert on_device[key].dtype == value.dtype, key
            np.testing.assert_array_equal(on_device[key], value, err_msg=key)


def _trained(config, batches, workdir: Path, data) -> tuple[Trainer, list[float]]:
    model = kinds.vtfn_model(config, data)
    trainer = Trainer(config, model, kinds.make_loss_fn(config), tables=batches.tables)
    result = trainer.fit(workdir, batches.dataset(config, trainer.tables_on_device))
    assert result.input_path == trainer.input_path.name
    return trainer, test_trainer._losses(workdir)


def test_both_paths_train_the_same_losses(data, tmp_path):
    """VTFN on the shapes world, features on the device or gathered on the host: the
    same losses step by step, and results.json's input_path says which ran."""
    runs = {}
    for setting in ("on", "off"):
        config = _config("runlocal,captions=all", setting, log_every=1)
        config.num_steps = 6
        batches = kinds.training_batches(data.splits["train"], pivot=False)
        runs[setting] = _trained(config, batches, tmp_path / setting, data)
    (on, on_losses), (off, off_losses) = runs["on"], runs["off"]
    assert on.tables_on_device and set(on.tables) == {"features"}
    assert not off.tables_on_device and off.tables == {}
    assert on.input_path.name == "device tables" and off.input_path.name == "host gather"
    assert len(on_losses) == 6
    np.testing.assert_allclose(on_losses, off_losses, rtol=1e-6, atol=1e-7)


def test_pin_model_a_indexes_its_features_and_pure_text_has_no_table(data):
    split = data.splits["train"]
    pin = language_models.training_batches(split, with_image=True)
    assert pin.tables["features"] is split.features
    rows = np.array([0, 9, 3, 27])  # captions of different images
    batch = pin.make_batch(rows, np.zeros(4))
    np.testing.assert_array_equal(batch["features_rows"], split.corpus.image_index[rows])
    np.testing.assert_array_equal(
        pin.host_batch(rows, np.zeros(4))["features"],
        split.features[split.corpus.image_index[rows]],
    )
    text_only = language_models.training_batches(split, with_image=False)
    assert text_only.tables is None and text_only.batch_fn(True) is text_only.make_batch
    config = baseline_pin_model_a.get_config("runlocal")
    assert config.device_tables == "auto"  # every config's trainer block names the key


def test_a_resumed_run_with_device_tables_ends_as_an_uninterrupted_one(tmp_path):
    """tests/test_trainer.py's regressor (dropout on) with its inputs as a device table:
    40 steps, stopped, resumed to 60 equals 60 straight on the host, losses and params."""
    config = test_trainer.tiny_config
    host_model, _ = test_trainer.run(config(device_tables="off"), tmp_path / "host", tables=True)
    test_trainer.run(config(device_tables="on", num_steps=40), tmp_path / "split", tables=True)
    model, resumed = test_trainer.run(config(device_tables="on"), tmp_path / "split", tables=True)
    assert resumed.step == 60 and resumed.input_path == "device tables"
    np.testing.assert_allclose(
        test_trainer._losses(tmp_path / "split"), test_trainer._losses(tmp_path / "host"), rtol=1e-6
    )
    ours, theirs = nnx.state(model, nnx.Param), nnx.state(host_model, nnx.Param)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    saved = {p.name for p in (tmp_path / "split" / "checkpoints").rglob("*")}
    assert not any("table" in name for name in saved)  # tables are data, never saved


EIGHT_DEVICES = """
import json, sys
sys.path.insert(0, "tests")
import jax
from test_trainer import run, tiny_config, _losses
model, result = run(tiny_config(device_tables="on", num_steps=10, log_every=1), sys.argv[1], tables=True)
print("RESULT", json.dumps({"devices": jax.device_count(), "path": result.input_path,
                            "losses": _losses(__import__("pathlib").Path(sys.argv[1]))}))
"""


def test_eight_devices_with_device_tables_train_like_one_on_the_host(tmp_path):
    """The tables replicated over 8 forced CPU devices, the index batch split over them:
    the losses of one device gathering on the host."""
    test_trainer.run(test_trainer.tiny_config(num_steps=10, log_every=1), tmp_path / "one")
    flags = os.environ.get("XLA_FLAGS", "")
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=f"{flags} --xla_force_host_platform_device_count=8",
    )
    done = subprocess.run(
        [sys.executable, "-c", EIGHT_DEVICES, str(tmp_path / "eight")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    eight = json.loads(done.stdout.split("RESULT", 1)[1])
    assert eight["devices"] == 8 and eight["path"] == "device tables"
    one = test_trainer._losses(tmp_path / "one")
    np.testing.assert_allclose(eight["losses"], one, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # 4 runs, each a fresh process (40 s on a loaded machine)
def test_killed_at_3_points_with_device_tables_ends_as_an_uninterrupted_host_run(tmp_path):
    """tests/test_kill_resume.py's SIGKILLs (one while a checkpoint is written) on a run
    with its inputs as a device table: it ends as the uninterrupted run on the host."""
    from test_kill_resume import _kill_and_compare

    _kill_and_compare(tmp_path, processes=1, seeds=[0], points=3, env={"DEVICE_TABLES": "on"})


@pytest.mark.slow  # two 2-process runs (gloo) and one single (about 30 s)
def test_two_processes_with_device_tables_train_like_one_on_the_host(tmp_path):
    """jax.distributed over gloo: each process places the same table and sends its block
    of indices; the processes agree on the path, and the run's losses are one process's."""
    from test_kill_resume import Run

    single = Run(tmp_path / "one", 20, 1)
    assert single.wait() == [0], single.stderr(0)[-3000:]
    pair = Run(tmp_path / "two", 20, 2, DEVICE_TABLES="on")
    assert pair.wait() == [0, 0], pair.stderr(0)[-3000:] + pair.stderr(1)[-3000:]
    one, two = test_trainer._losses(tmp_path / "one"), test_trainer._losses(tmp_path / "two")
    assert len(two) == 20
    np.testing.assert_allclose(two, one, rtol=1e-5, atol=1e-6)


def test_two_processes_index_the_rows_of_one_global_batch(data, monkeypatch):
    """Each process sends only its block of indices; the tables are the same on every
    process, so the global batch the step gathers is one process's, row for row."""
    config = _config("runlocal,captions=all")
    batches = kinds.training_batches(data.splits["train"], pivot=True)
    whole = _batches(batches.dataset(config, tables_on_device=True), 4)
    monkeypatch.setattr(pipeline.jax, "process_count", lambda: 2)
    shares = []
    for index in range(2):
        monkeypatch.setattr(pipeline.jax, "process_index", lambda index=index: index)
        shares.append(_batches(batches.dataset(config, tables_on_device=True), 4))
    for full, zero, one in zip(whole, *shares, strict=True):
        for key in full:
            np.testing.assert_array_equal(np.concatenate([zero[key], one[key]]), full[key])
        joined = {k: np.concatenate([zero[k], one[k]]) for k in full}
        gathered = device_tables.gather_tables(batches.tables, joined)
        np.testing.assert_array_equal(
            gathered["features"], batches.tables["features"][full["features_rows"]]
        )


def test_the_feature_table_is_the_loaded_training_split(data):
    """The device path reads the features the loader kept (its Karpathy-test and
    Flickr8k-test guards act there, tests/test_caption_sources.py): the training
    split's own matrix, one row per training image, nothing else."""
    config = _config("runlocal,captions=all")
    task = kinds.vtfn_task(config, data)
    train = data.splits["train"]
    assert task.batches.tables["features"] is train.features
    assert len(train.features) == len(train.corpus.image_ids)
    rows = task.batches.make_batch(np.arange(len(train.corpus)), np.zeros(len(train.corpus)))
    assert rows["features_rows"].max() < len(train.corpus.image_ids)


TABLE = {"features": np.zeros((1000, 1000), np.float32)}  # 4 MB


def _small_memory(monkeypatch, free: int = 2_000_000) -> None:
    monkeypatch.setattr(
        device_tables, "free_memory", lambda devices: (free, 1, "test device memory")
    )


def test_forced_on_that_does_not_fit_stops_before_training_naming_sizes(monkeypatch, tmp_path):
    _small_memory(monkeypatch)
    config = test_trainer.tiny_config(device_tables="on")
    with pytest.raises(
        device_tables.DeviceTablesError,
        match=r"device_tables=on: the tables need 4\.0 MB \(features \(1000, 1000\) float32 "
        r"4\.0 MB\) but 50% of the free test device memory is 1\.0 MB \(free 2\.0 MB\)",
    ):
        Trainer(config, test_trainer.Regressor(nnx.Rngs(0)), test_trainer.mse, tables=TABLE)


def test_forced_on_stops_a_vtfn_run_before_it_trains(monkeypatch, tmp_path):
    from vtfn_jax.train import train_and_evaluate

    _small_memory(monkeypatch, free=1000)
    with pytest.raises(
        device_tables.DeviceTablesError,
        match=r"need [\d.]+ KB \(features \(\d+, \d+\) float32 .* \(free 1\.0 KB\)",
    ):
        train_and_evaluate(_config(device_tables="on"), tmp_path)
    assert not (tmp_path / "checkpoints").exists() and not (tmp_path / "metrics.jsonl").exists()


def _regressor_with_table() -> Trainer:
    return Trainer(
        test_trainer.tiny_config(),
        test_trainer.Regressor(nnx.Rngs(0)),
        test_trainer.mse,
        tables=TABLE,
    )


def test_auto_falls_back_to_the_host_and_says_why(monkeypatch, caplog):
    _small_memory(monkeypatch)
    with caplog.at_level(logging.INFO):
        trainer = _regressor_with_table()
    assert not trainer.tables_on_device and trainer.tables == {}
    assert trainer.input_path.fell_back
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "host gather: features (1000, 1000) float32 4.0 MB = 4.0 MB; free test device memory "
        "2.0 MB: over 50%" in m
        for m in warned
    ), warned


def test_auto_places_tables_that_fit_and_says_so(monkeypatch, caplog):
    _small_memory(monkeypatch, free=10**9)
    with caplog.at_level(logging.INFO):
        trainer = _regressor_with_table()
    assert trainer.tables_on_device and isinstance(trainer.tables["features"], jax.Array)
    assert any(
        "input: device tables: features (1000, 1000) float32 4.0 MB" in r.getMessage()
        for r in caplog.records
    )


def test_cpu_devices_count_each_copy_against_host_memory():
    free, copies, memory = device_tables.free_memory(jax.local_devices())
    assert memory.startswith("host memory") and copies == len(jax.local_devices())
    assert free is None or free > 0
    path = device_tables.choose_path("auto", {"x": np.zeros((4, 2), np.float64)}, jax.devices())
    assert path.on_device and "x (4, 2) float64 32 B" in path.reason
    assert device_tables.table_bytes({"x": np.zeros((4, 2), np.float64)}) == 32  # as float32


def test_a_host_that_does_not_say_its_memory_counts_as_room(monkeypatch):
    """On CPU the tables are in host memory either way: "auto" places them."""
    monkeypatch.setattr(device_tables, "host_available_bytes", lambda: None)
    assert device_tables.choose_path("auto", TABLE, jax.local_devices()).on_device


@pytest.mark.parametrize("value", ["sometimes", "", 2])
def test_a_bad_setting_is_a_clear_error(value):
    with pytest.raises(device_tables.DeviceTablesError, match=r"config\.device_tables=.*'auto'"):
        device_tables.choose_path(value, TABLE, jax.devices())


def test_stores_read_by_rows_stay_on_the_host():
    class Store:  # like vtfn_jax.features.ArrayRecordFeatures
        shape, dtype = (10, 2), np.float32

        def __getitem__(self, rows):
            return np.ones((len(rows), 2), np.float32)

    path = device_tables.choose_path("auto", {"features": Store()}, jax.devices())
    assert not path.on_device and "read from a store" in path.reason
    with pytest.raises(device_tables.DeviceTablesError, match="read from a store"):
        device_tables.choose_path("on", {"features": Store()}, jax.devices())
    batch = device_tables.gather_tables({"features": Store()}, {"features_rows": np.arange(3)})
    assert batch["features"].shape == (3, 2)
