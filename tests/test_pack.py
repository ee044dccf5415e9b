"""launch.pack (``launch.sweep --pack N``): members trained in turn by one process, each
the run its job stands for: the same losses at every step and the same final metrics as
its solo run; a failing member does not stop the others; a SIGTERM ends the pack."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from launch import aggregate, grid, pack, sweep, tasks

REPO = Path(__file__).resolve().parents[1]
# Keys that time the run, not train it: they differ between any two runs.
TIMING = ("examples_per_second", "seconds", "time", "pack")

FAKE_CONFIG = """
import ml_collections

TRAIN_MODULE = "fake_train"
METRICS = {"score": ("score",)}


def get_config(arg=None):
    return ml_collections.ConfigDict(
        dict(seed=0, batch_size=1, evals={}, optimizer=dict(learning_rate=0.1))
    )


def get_sweep(hyper, arg=None):
    return hyper.sweep("config.seed", [0, 1, 2, 3, 4])
"""
FAKE_TRAIN = """
import sys

from capsim.task import Task


def declare(config, workdir):
    def fit(workdir):  # a model fit without gradient steps: its members run in turn
        print("training seed", config.seed)
        if config.seed == 1:
            raise RuntimeError("member 1 fails")
        if config.seed == 3:  # as the trainer does on SIGTERM: saved, exit 0
            sys.exit(0)
        return None, {"score": config.seed * 10}

    return Task(subject_of=lambda model: None, fit=fit, results=lambda summary, report: summary)
"""


def test_jobs_pack_by_shape_and_size():
    jobs = [
        grid.Job(f"j{k}", {}, {"config.seed": k % 3, "config.loss.name": loss})
        for k, loss in enumerate(["a", "a", "a", "b", "a", "b"])
    ]
    groups = [[job.name for job in group] for group in tasks.packs(jobs, 2)]
    assert groups == [["j0", "j1"], ["j2", "j4"], ["j3", "j5"]]
    assert grid.shape_of({"config.seed": 1, "config.optimizer.learning_rate": 0.1}) == "{}"


def test_a_pack_runs_its_members_in_turn(tmp_path, monkeypatch, capsys):
    (tmp_path / "fake_train.py").write_text(FAKE_TRAIN)
    config = tmp_path / "fake_sweep.py"
    config.write_text(FAKE_CONFIG)
    monkeypatch.syspath_prepend(str(tmp_path))
    workdir = tmp_path / "runs"
    jobs = grid.expand_grid(sweep.load_config_module(config), "")
    for job in jobs:
        grid.prepare_job(job, workdir, [], pack=[j.name for j in jobs])
    dirs = [workdir / job.name for job in jobs]
    assert pack.run_pack("fake_train", str(config), dirs) == 1
    results = json.loads((dirs[2] / "results.json").read_text())
    assert results == {"score": 20, "pack": {"mode": "in_turn", "members": 5, "index": 2}}
    assert "training seed 2" in (dirs[2] / "log.txt").read_text()
    assert "RuntimeError: member 1 fails" in (dirs[1] / "log.txt").read_text()
    assert json.loads((dirs[1] / "job.json").read_text())["returncode"] == 1
    stopped = json.loads((dirs[3] / "job.json").read_text())
    assert "returncode" not in stopped and not (dirs[3] / "results.json").exists()
    never_trained = json.loads((dirs[4] / "job.json").read_text())  # the next sweep resumes it
    assert "returncode" not in never_trained and not (dirs[4] / "results.json").exists()
    assert "training seed" not in capsys.readouterr().out  # members write to their logs
    rows = {
        row["job"]: row["status"] for row in aggregate.aggregate(workdir, {"score": ("score",)})
    }
    assert list(rows.values()) == ["ok", "failed", "ok", "unfinished", "unfinished"]


def _solo_vs_packed_config(
    tmp_path: Path, base: str, steps: int, checkpoint_every: int = 0
) -> Path:
    path = tmp_path / "sweep_members.py"
    path.write_text(
        textwrap.dedent(
            f"""
            from configs import {base} as base
            from configs.{base} import METRICS, TRAIN_MODULE, get_config


            def get_sweep(hyper, arg=None):
                members = [
                    {{"config.seed": 0, "config.optimizer.learning_rate": 1e-3}},
                    {{"config.seed": 1, "config.optimizer.learning_rate": 3e-3}},
                    {{"config.seed": 0, "config.optimizer.learning_rate": 3e-3}},
                ]
                steps = hyper.sweep("config.num_steps", [{steps}])
                patience = hyper.sweep("config.early_stopping.patience", [1000])
                fixed = [steps, patience]
                if {checkpoint_every}:
                    fixed.append(hyper.sweep("config.checkpoint_every", [{checkpoint_every}]))
                return hyper.product([base.get_sweep(hyper, arg), members, *fixed])
            """
        )
    )
    return path


def _trained(job_dir: Path) -> tuple[list[dict], dict]:
    def untimed(row: dict) -> dict:
        return {
            k: untimed(v) if isinstance(v, dict) else v
            for k, v in row.items()
            if not any(word in k for word in TIMING)
        }

    rows = [untimed(json.loads(line)) for line in (job_dir / "metrics.jsonl").open()]
    return rows, untimed(json.loads((job_dir / "results.json").read_text()))


@pytest.mark.slow  # 6 trainings of 50 steps per model and mode, 3 in processes of their own
@pytest.mark.parametrize("mode", ["in_turn", "vmapped"])
@pytest.mark.parametrize(
    "base, arg",
    [
        ("sweep_vtfn", "dataset=shapes_world,encoder=bow_sum,loss=pearson"),
        ("sweep_vtfn", "dataset=shapes_world,encoder=gru,loss=pearson"),
        ("sweep_i2ce", "branch=margin-mean,hidden=32"),
    ],
)
def test_a_packed_member_equals_its_solo_run(tmp_path, base, arg, mode):
    """Three members differing in seed and learning rate, 50 steps: every logged loss and
    every final metric equal their solo runs' (a member is that run, in a shared process):
    in turn exactly; vmapped (two of them share a vocabulary, so a program) to 1e-4."""
    config = f"{_solo_vs_packed_config(tmp_path, base, 50)}:{arg},runlocal"
    assert sweep.run_sweep(config, tmp_path / "packed", pack=3, member_mode=mode) == 0
    assert sweep.run_sweep(config, tmp_path / "solo", pack=1) == 0
    names = sorted(p.parent.name for p in (tmp_path / "solo").glob("*/results.json"))
    assert len(names) == 3
    sizes = []
    for name in names:
        solo_rows, solo = _trained(tmp_path / "solo" / name)
        packed_rows, packed = _trained(tmp_path / "packed" / name)
        losses = [row for row in solo_rows if "train/loss" in row]
        assert solo_rows[-1]["step"] >= 50 and len(losses) >= 5
        if mode == "in_turn":
            assert packed_rows == solo_rows and packed == solo
        else:
            _assert_close(packed_rows, solo_rows, name)
            _assert_close(packed, solo, name)
        pack_info = json.loads((tmp_path / "packed" / name / "results.json").read_text())["pack"]
        assert pack_info["mode"] == mode
        sizes.append(pack_info["members"])
    assert max(sizes) == (3 if mode == "in_turn" else 2) or sizes == [3, 3, 3]


def _assert_close(a: object, b: object, where: str) -> None:
    """Equal structure, numbers within rel 1e-4 (abs 1e-5): vmapped matmuls may round apart."""
    if isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for key in b:
            _assert_close(a[key], b[key], f"{where}.{key}")
    elif isinstance(b, list):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{where}[{k}]")
    elif isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-5), where
    else:
        assert a == b, where


@pytest.mark.slow  # an uninterrupted pack, a killed one and its resumption (about 60 s a mode)
@pytest.mark.parametrize("mode", ["in_turn", "vmapped"])
def test_a_pack_killed_mid_member_resumes_to_the_uninterrupted_pack(tmp_path, mode):
    """SIGKILL to the whole sweep at a seeded step of the second member; the same command
    again skips a finished member, resumes the killed ones from their checkpoints, and
    every member's logged losses and metrics equal an uninterrupted pack's."""
    arg = "dataset=shapes_world,encoder=bow_sum,loss=pearson,runlocal"
    config = f"{_solo_vs_packed_config(tmp_path, 'sweep_vtfn', 60, checkpoint_every=10)}:{arg}"
    flags = {"pack": 3, "member_mode": mode}
    assert sweep.run_sweep(config, tmp_path / "whole", **flags) == 0
    names = sorted(p.parent.name for p in (tmp_path / "whole").glob("*/results.json"))
    target = int(np.random.default_rng(0).integers(15, 45))
    killed = tmp_path / "killed"
    command = [sys.executable, "-m", "launch.sweep", f"--config={config}"]
    process = subprocess.Popen(
        [*command, f"--workdir={killed}", "--pack=3", f"--member_mode={mode}"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    second = killed / names[1] / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        rows = second.read_text().splitlines() if second.exists() else []
        if rows and json.loads(rows[-1])["step"] >= target:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the pack ended before the kill"
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert (killed / names[0] / "results.json").exists() == (mode == "in_turn")
    assert not (killed / names[1] / "results.json").exists()
    assert sweep.run_sweep(config, killed, **flags) == 0
    for name in names:
        whole_rows, whole = _trained(tmp_path / "whole" / name)
        resumed_rows, resumed = _trained(killed / name)
        assert [row["step"] for row in resumed_rows] == [row["step"] for row in whole_rows]
        for a, b in zip(resumed_rows, whole_rows, strict=True):
            for key, value in b.items():
                assert a[key] == pytest.approx(value, rel=1e-6, abs=1e-6), (name, key)
        assert resumed.keys() == whole.keys()
        assert resumed["same_diff"] == pytest.approx(whole["same_diff"], rel=1e-6)


def test_pack_auto_puts_a_shape_in_one_process_that_fits_memory(tmp_path):
    """``--pack auto``: every job of a shape in one process, told to split vmapped members
    into programs that fit (``--fit_memory``); a number or auto, nothing else."""
    (tmp_path / "fake_train.py").write_text(FAKE_TRAIN)
    config = tmp_path / "fake_sweep.py"
    config.write_text(FAKE_CONFIG)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}")
    command = [sys.executable, "-m", "launch.sweep", f"--config={config}"]
    subprocess.run(
        [*command, f"--workdir={tmp_path / 'runs'}", "--pack", "auto"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "runs").glob("*/job.json"))]
    assert len(records) == 5 and all(r["pack"] == records[0]["pack"] for r in records)
    assert all("--fit_memory" in r["command"] for r in records)
    refused = subprocess.run(
        [*command, f"--workdir={tmp_path / 'other'}", "--pack", "many"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "--pack" in refused.stderr


def test_member_mode_flag_has_one_spelling_and_keeps_the_old_one():
    """``in_turn`` needs no quoting; the old ``'in turn'`` still means the same."""
    parser = argparse.ArgumentParser()
    grid.add_member_mode_flag(parser)
    assert parser.parse_args(["--member_mode", "in_turn"]).member_mode == "in_turn"
    assert parser.parse_args(["--member_mode", "in turn"]).member_mode == "in_turn"
    assert parser.parse_args([]).member_mode == "auto"
    with pytest.raises(SystemExit):
        parser.parse_args(["--member_mode", "sideways"])


def test_a_new_optimizer_number_becomes_a_member_key_for_launch(monkeypatch):
    """Member keys derive from what the optimizer and the losses declare
    (capsim.config_lib): a hyperparameter added there is a member key of launch.grid
    without touching launch, and the vmapped keys of capsim.train.members agree."""
    import importlib

    from capsim import config_lib
    from capsim.train import members

    optimizer_keys = {f"config.optimizer.{name}" for name in config_lib.HYPERPARAMETERS}
    assert optimizer_keys <= set(grid.MEMBER_KEYS)
    assert {f"config.{key}" for key in members.VMAPPED_KEYS} >= optimizer_keys
    monkeypatch.setattr(config_lib, "HYPERPARAMETERS", (*config_lib.HYPERPARAMETERS, "momentum"))
    try:
        reloaded = importlib.reload(grid)
        assert "config.optimizer.momentum" in reloaded.MEMBER_KEYS
        overrides = {"config.seed": 1, "config.optimizer.momentum": 0.9}
        assert reloaded.shape_of(overrides) == "{}"
    finally:
        monkeypatch.undo()
        importlib.reload(grid)
    assert "config.optimizer.momentum" not in grid.MEMBER_KEYS
