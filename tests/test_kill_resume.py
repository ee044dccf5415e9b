"""Killed at any moment and resumed with the same command, a run ends as if never stopped.

A small training run (tests/test_trainer.py's regressor, dropout on, a checkpoint
every 7 steps) is killed with SIGKILL at seeded random steps, once while a
checkpoint is being written, and restarted each time with the same command. Its
final parameters and its metrics.jsonl equal those of an uninterrupted run to
1e-6, with every step logged once. With two processes (gloo) one of them is
killed each time, and the other must stop by itself with a clear error. The
fast tier kills one process at 5 points; ``python -m pytest -m slow
tests/test_kill_resume.py`` kills one of two at those 5 points, and both cases at 8 more
points for 3 more seeds.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import requires

REPO = Path(__file__).resolve().parents[1]

# Seconds a survivor may take to stop after its peer is killed: at once when the
# next all-reduce fails, or after the (test-shortened) heartbeat timeout when the
# peer died inside a checkpoint save's barrier.
HEARTBEAT_TIMEOUT_S = 10
SURVIVOR_DEADLINE_S = 90
NUM_STEPS = 240  # 8 kills at most 26 steps apart stay inside the run
# The cadence of runs that no kill interrupts: the reference and the run that finishes
# after the last kill. It never comes, so they write no checkpoint on the way (a save
# every 7 steps made a 2-process run 17 s against 5 s), and the reference proves that
# saving leaves the run unchanged.
NEVER = str(10**9)

CHILD = r"""
import os, signal, sys
sys.path.insert(0, "tests")
import jax
import numpy as np
from flax import nnx
jax.config.update("jax_cpu_collectives_implementation", "gloo")
from capsim import mesh
from capsim.workdir import CHECKPOINT_DIR
mesh.maybe_initialize_distributed()
from test_trainer import run, tiny_config

die_at = int(os.environ.get("DIE_DURING_SAVE", -1))
if die_at >= 0 and jax.process_index() == int(os.environ.get("DIE_PROCESS", 0)):
    import orbax.checkpoint as ocp

    save = ocp.CheckpointManager.save

    def save_then_die(self, step, *args, **kwargs):
        saved = save(self, step, *args, **kwargs)  # asynchronous: files still being written
        if step == die_at and self.directory.name == CHECKPOINT_DIR:
            os.kill(os.getpid(), signal.SIGKILL)
        return saved

    ocp.CheckpointManager.save = save_then_die

if jax.process_index() == int(os.environ.get("BAD_SHAPE_PROCESS", -1)):
    import jax.numpy as jnp
    import test_trainer

    def bad_shape_loss(model, batch, key):  # [B] @ [7, 2]: fails while tracing, here only
        return jnp.mean(model(batch["x"]) @ jnp.ones((7, 2))), {}

    test_trainer.mse = bad_shape_loss

pace = float(os.environ.get("STEP_SECONDS", 0))
if pace:  # each batch waits this long: steps at a known rate, whatever the machine
    import time
    import test_trainer

    unpaced = test_trainer.make_batch

    def paced_batch(rows, draws):
        time.sleep(pace)
        return unpaced(rows, draws)

    test_trainer.make_batch = paced_batch

workdir, num_steps = sys.argv[1], int(sys.argv[2])
every = int(os.environ.get("CHECKPOINT_EVERY", 7))
tables = os.environ.get("DEVICE_TABLES", "")  # "on": the inputs as a device table
config = tiny_config(num_steps=num_steps, checkpoint_every=every, log_every=1)
if tables:
    config.device_tables = tables
model, _ = run(config, workdir, tables=bool(tables))
if jax.process_index() == 0:
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    leaves = jax.tree_util.tree_leaves_with_path(params)
    flat = {jax.tree_util.keystr(path): np.asarray(leaf) for path, leaf in leaves}
    np.savez(os.path.join(workdir, "final_params.npz"), **flat)
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Run:
    """The same command started as ``processes`` processes on localhost."""

    def __init__(self, workdir: Path, num_steps: int, processes: int, **env: str):
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        port, self.logs, self.procs = _free_port(), [], []
        for rank in range(processes):
            extra = dict(env)
            if processes > 1:
                extra.update(
                    JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
                    JAX_NUM_PROCESSES=str(processes),
                    JAX_PROCESS_ID=str(rank),
                    CAPSIM_HEARTBEAT_TIMEOUT_S=str(HEARTBEAT_TIMEOUT_S),
                )
            log = workdir / f"stderr.{rank}.{time.monotonic_ns()}.txt"
            self.logs.append(log)
            with log.open("w") as err:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, "-c", CHILD, str(workdir), str(num_steps)],
                        cwd=REPO,
                        env=dict(os.environ, JAX_PLATFORMS="cpu", **extra),
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                    )
                )

    def stderr(self, rank: int) -> str:
        return self.logs[rank].read_text()

    def wait(self, timeout: float = 300) -> list[int]:
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout=timeout))
            except subprocess.TimeoutExpired:
                self.kill_all()
                raise
        return codes

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _logged_step(metrics: Path) -> int:
    """The last step in metrics.jsonl (complete lines only; 0 before the first)."""
    try:
        lines = metrics.read_text().split("\n")[:-1]
    except FileNotFoundError:
        return 0
    return max((json.loads(line)["step"] for line in lines), default=0)


def _kill_after(run: Run, step: int, victim: int) -> int:
    """SIGKILLs process ``victim`` once the run has logged ``step``; returns the step reached."""
    metrics = run.workdir / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while _logged_step(metrics) < step:
        if any(proc.poll() is not None for proc in run.procs) or time.monotonic() > deadline:
            run.kill_all()
            pytest.fail(f"the run stopped before step {step}: {run.stderr(0)[-2000:]}")
        time.sleep(0.002)
    run.procs[victim].send_signal(signal.SIGKILL)
    run.procs[victim].wait()
    return _logged_step(metrics)


def _expect_survivors_to_stop(run: Run, victim: int) -> None:
    """Every other process exits non-zero, by itself, saying that a peer died."""
    for rank, proc in enumerate(run.procs):
        if rank == victim:
            continue
        try:
            code = proc.wait(timeout=SURVIVOR_DEADLINE_S)
        except subprocess.TimeoutExpired:
            run.kill_all()
            pytest.fail(f"process {rank} hung after process {victim} was killed")
        err = run.stderr(rank)
        assert code != 0, err[-2000:]
        # Ours after a failed all-reduce; jax's own after the heartbeat timeout.
        assert (
            "another process of this run most likely died" in err or "another task died" in err
        ), err[-3000:]


def _expect_unfinished_checkpoint(checkpoints: Path, step: int, victim: int) -> None:
    """Killing the writer (process 0) mid-save leaves the step unfinished: its
    ``.orbax-checkpoint-tmp`` folder and no finished step a resume could pick up.

    Another victim dies once its own part of the save has returned, and process 0
    may still finish the step (it did in 1 of 10 loaded runs): then the step is
    there, complete, and the resume must use it or set it aside. Either way the
    run must end as if never stopped, which ``_check_same_run`` checks.
    """
    if victim != 0:
        return
    assert not (checkpoints / str(step)).exists(), f"step {step} was finished despite the kill"
    assert (checkpoints / f"{step}.orbax-checkpoint-tmp").exists(), (
        "the kill did not land while the checkpoint was being written"
    )


def _kill_plan(rng: np.random.Generator, points: int) -> list[tuple[str, int]]:
    """``points`` kills: one during the checkpoint write nearest a random step, others at random steps."""
    during_save = int(rng.integers(points))
    return [
        ("save" if i == during_save else "step", int(rng.integers(4, 20))) for i in range(points)
    ]


def _train_with_kills(
    workdir: Path, seed: int, points: int, processes: int, env: dict | None = None
) -> list[str]:
    """Runs to the end through ``points`` SIGKILLs; returns what each kill hit, for messages.
    ``env``: more variables for every run (``DEVICE_TABLES``)."""
    env = env or {}
    rng = np.random.default_rng(seed)
    reached, history = 0, []
    for kind, gap in _kill_plan(rng, points):
        victim = int(rng.integers(processes))
        if kind == "save":
            at = (reached // 7 + 1 + gap // 7) * 7  # a checkpoint step ahead
            run = Run(
                workdir,
                NUM_STEPS,
                processes,
                DIE_DURING_SAVE=str(at),
                DIE_PROCESS=str(victim),
                **env,
            )
            run.procs[victim].wait(timeout=300)
            assert run.procs[victim].returncode == -signal.SIGKILL, run.stderr(victim)[-2000:]
            _expect_survivors_to_stop(run, victim)
            _expect_unfinished_checkpoint(workdir / "checkpoints", at, victim)
            reached = at
        else:
            run = Run(workdir, NUM_STEPS, processes, **env)
            reached = _kill_after(run, reached + gap, victim)
            _expect_survivors_to_stop(run, victim)
        history.append(f"{kind}@{reached}/p{victim}")
    final = Run(workdir, NUM_STEPS, processes, CHECKPOINT_EVERY=NEVER, **env)
    assert final.wait() == [0] * processes, final.stderr(0)[-3000:]
    return history


def _rows(workdir: Path) -> list[dict]:
    return [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]


def _check_same_run(killed: Path, uninterrupted: Path, history: list[str]) -> None:
    rows, reference = _rows(killed), _rows(uninterrupted)
    assert [r["step"] for r in rows] == list(range(1, NUM_STEPS + 1)), history
    for key in ("train/loss", "train/grad_norm"):
        np.testing.assert_allclose(
            [r[key] for r in rows], [r[key] for r in reference], rtol=1e-6, atol=1e-7, err_msg=key
        )
    params = np.load(killed / "final_params.npz")
    expected = np.load(uninterrupted / "final_params.npz")
    assert sorted(params) == sorted(expected)
    for name in expected:
        np.testing.assert_allclose(params[name], expected[name], rtol=1e-6, atol=1e-7)


def _kill_and_compare(
    tmp_path: Path, processes: int, seeds: list[int], points: int, env: dict | None = None
) -> None:
    """``env`` goes to the killed runs only: the uninterrupted reference runs as it is."""
    uninterrupted = Run(tmp_path / "uninterrupted", NUM_STEPS, processes, CHECKPOINT_EVERY=NEVER)
    assert uninterrupted.wait() == [0] * processes, uninterrupted.stderr(0)[-3000:]
    for seed in seeds:
        killed = tmp_path / f"killed-{seed}"
        history = _train_with_kills(killed, seed, points, processes, env)
        _check_same_run(killed, tmp_path / "uninterrupted", history)


@pytest.mark.slow  # 5 kill points, 6 runs (46 s); fast: SIGTERM and exact resume, test_trainer
def test_one_process_killed_at_5_points_resumes_exactly(tmp_path):
    _kill_and_compare(tmp_path, processes=1, seeds=[0], points=5)


@pytest.mark.slow  # 11 two-process runs (70 s); the fast tier's 2-process stop: test_faults.py
def test_two_processes_one_killed_at_5_points_resume_exactly(tmp_path):
    _kill_and_compare(tmp_path, processes=2, seeds=[0], points=5)


@pytest.mark.slow
@pytest.mark.parametrize("processes", [1, 2])
def test_many_kill_points_resume_exactly(tmp_path, processes):
    _kill_and_compare(tmp_path, processes=processes, seeds=[1, 2, 3], points=8)


@requires("jax")  # the runs are JAX processes; the module itself imports no JAX
def test_two_cpu_processes_rerun_with_a_warm_compilation_cache(tmp_path):
    """With JAX 0.12, two gloo processes whose step comes from the persistent compilation
    cache waited forever in its first collective; capsim.mesh turns the cache off for a
    run of several CPU processes, so a rerun on a warm cache finishes like the first."""
    cache = dict(
        JAX_COMPILATION_CACHE_DIR=str(tmp_path / "cache"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        CHECKPOINT_EVERY=NEVER,
    )
    for attempt in ("first", "rerun"):
        run = Run(tmp_path / attempt, 40, 2, **cache)
        assert run.wait(timeout=120) == [0, 0], run.stderr(0)[-2000:]
        assert _logged_step(run.workdir / "metrics.jsonl") == 40
