"""Interruptions a run must survive: agreed preemption, a bad error, a damaged
checkpoint, a second run on a live workdir (capsim.train.faults, checkpoint, lock).

The multi-process cases start 2 gloo processes on localhost, as
tests/test_kill_resume.py does, and compare with its uninterrupted reference.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_kill_resume import NEVER, NUM_STEPS, Run, _check_same_run, _logged_step
from test_trainer import PREEMPTED_RUN, dev_eval, run, tiny_config

from capsim.errors import UnusableCheckpointsError
from capsim.train.faults import PEER_FAILURE_EXIT_CODE
from capsim.train.lock import WorkdirBusyError

REPO = Path(__file__).resolve().parents[1]
PREEMPTION_DEADLINE_S = 60  # the bound for every process to save and exit
# Seconds each step of the preempted run waits: its 210 steps after the signal take
# 21 s or more, 20x the agreement's slowest time measured under load (1.02 s).
STEP_S = 0.1


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("uninterrupted")
    reference = Run(workdir, NUM_STEPS, 2, CHECKPOINT_EVERY=NEVER)
    assert reference.wait() == [0, 0], reference.stderr(0)[-3000:]
    return workdir


def _wait_for_step(run_: Run, step: int) -> None:
    deadline = time.monotonic() + 300
    while _logged_step(run_.workdir / "metrics.jsonl") < step:
        if any(p.poll() is not None for p in run_.procs) or time.monotonic() > deadline:
            codes = [p.poll() for p in run_.procs]
            run_.kill_all()
            logs = "\n".join(
                f"process {rank} (exit {code}): {run_.stderr(rank)[-2000:]}"
                for rank, code in enumerate(codes)
            )
            pytest.fail(f"the run stopped before step {step}:\n{logs}")
        time.sleep(0.01)


# The notice to the process that is not the coordinator: the fast tier; to the
# coordinator (4 more 2-process runs, 30 s): the slow tier
@pytest.mark.parametrize("signalled", [1, pytest.param(0, marks=pytest.mark.slow)])
def test_sigterm_to_one_process_stops_both_at_one_step_and_resumes_exactly(
    tmp_path, uninterrupted, signalled
):
    """Whichever host gets the notice, both save the same step and exit 0; the same
    command then finishes the run as if never stopped.

    The preempted run's steps are paced (STEP_SECONDS), so the agreement, about 1-2 s
    after the signal (bench/RESULTS.md, "Preemption"), always comes long before the
    run's end, on a loaded machine or a fast one.
    """
    workdir = tmp_path / "preempted"
    preempted = Run(workdir, NUM_STEPS, 2, CHECKPOINT_EVERY=NEVER, STEP_SECONDS=str(STEP_S))
    _wait_for_step(preempted, 30)
    signal_step = _logged_step(workdir / "metrics.jsonl")
    preempted.procs[signalled].send_signal(signal.SIGTERM)
    start = time.monotonic()
    codes = preempted.wait(timeout=PREEMPTION_DEADLINE_S)
    assert time.monotonic() - start < PREEMPTION_DEADLINE_S
    assert codes == [0, 0], [preempted.stderr(r)[-2000:] for r in (0, 1)]
    texts = [preempted.stderr(r) for r in (0, 1)]
    finished = [r for r in (0, 1) if "saved a checkpoint" not in texts[r]]
    assert not finished, (
        f"no agreed stop within {(NUM_STEPS - signal_step) * STEP_S:.0f} s of SIGTERM: "
        f"the run finished first; {texts[0][-2000:]}"
    )
    agreed = {int(re.search(r"stopping at step (\d+), the step every", t).group(1)) for t in texts}
    saved = {int(re.search(r"saved a checkpoint at step (\d+)", t).group(1)) for t in texts}
    assert len(agreed) == 1 and agreed == saved, (agreed, saved)  # both name the same step
    step = saved.pop()
    assert signal_step < step < NUM_STEPS  # after the notice, before the end
    steps = [p.name for p in (workdir / "checkpoints").iterdir() if p.name.isdigit()]
    assert steps == [str(step)]  # one checkpoint, at that step
    assert _logged_step(workdir / "metrics.jsonl") == step

    resumed = Run(workdir, NUM_STEPS, 2, CHECKPOINT_EVERY=NEVER)
    assert resumed.wait() == [0, 0], resumed.stderr(0)[-3000:]
    _check_same_run(workdir, uninterrupted, [f"SIGTERM to process {signalled}"])


def test_an_error_that_is_not_a_lost_peer_is_not_exit_75(tmp_path):
    """A bad shape in one process exits with its own message and status (not 0, not
    75: rerunning would not help); its peer stops too instead of hanging."""
    failing = Run(tmp_path, NUM_STEPS, 2, BAD_SHAPE_PROCESS="1")
    codes = failing.wait(timeout=120)
    err = failing.stderr(1)
    assert codes[1] not in (0, PEER_FAILURE_EXIT_CODE), err[-3000:]
    assert "dot_general requires contracting dimensions" in err or "shape" in err.lower(), err
    assert "which is not a lost peer" in err
    assert codes[0] != 0, failing.stderr(0)[-2000:]


def _params(model) -> dict[str, np.ndarray]:
    return {
        "kernel": np.asarray(model.linear.kernel[...]),
        "bias": np.asarray(model.linear.bias[...]),
    }


def test_a_damaged_newest_checkpoint_falls_back_and_the_rerun_ends_as_the_first(tmp_path, caplog):
    """The newest checkpoint (also the newest evaluation) is overwritten with random
    bytes after a finished run; the same command falls back to the previous step,
    says so, trains again and ends with the first run's numbers."""
    config = dict(num_steps=60, checkpoint_every=10, log_every=1)
    first_model, first = run(tiny_config(**config), tmp_path, dev_eval, every=20)
    first_rows = (tmp_path / "metrics.jsonl").read_text().splitlines()
    rng = np.random.default_rng(0)
    for path in (tmp_path / "checkpoints" / "60").rglob("*"):
        if path.is_file():
            path.write_bytes(rng.bytes(max(path.stat().st_size, 16)))
    with caplog.at_level(logging.WARNING):
        second_model, second = run(tiny_config(**config), tmp_path, dev_eval, every=20)
    assert "checkpoint step 60" in caplog.text and "damaged" in caplog.text
    assert (tmp_path / "checkpoints" / "60.damaged").is_dir()
    assert second.step == 60 and second.best_metric == pytest.approx(first.best_metric, rel=1e-6)
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    expected = [json.loads(line) for line in first_rows]
    assert [r["step"] for r in rows] == [r["step"] for r in expected]
    for got, want in zip(rows, expected, strict=True):
        for key in want:
            if key != "train/examples_per_second":
                assert got[key] == pytest.approx(want[key], rel=1e-6, abs=1e-7), key
    for name, value in _params(first_model).items():
        np.testing.assert_allclose(_params(second_model)[name], value, rtol=1e-6)


def _scramble(folder: Path, rng: np.random.Generator) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            path.write_bytes(rng.bytes(max(path.stat().st_size, 16)))


def _files(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (the live run's lock aside) by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and p.name != ".run.lock"
    }


def test_every_checkpoint_damaged_stops_the_run_and_start_over_keeps_the_old_one(tmp_path):
    """With every checkpoint overwritten by random bytes, the same command stops with an
    error naming checkpoints/ and changes no file; ``start_over`` moves the old run to
    previous-run-1, byte for byte, and trains again from step 0."""
    config = dict(num_steps=60, checkpoint_every=20, log_every=5)
    _, first = run(tiny_config(**config), tmp_path, dev_eval, every=30)
    (tmp_path / "results.json").write_text('{"written": "by the finished run"}\n')
    rng = np.random.default_rng(0)
    kept_steps = [p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()]
    assert len(kept_steps) >= 2  # the newest steps and the best evaluation
    for step in kept_steps:
        _scramble(tmp_path / "checkpoints" / step, rng)
    before = _files(tmp_path)
    for _ in range(2):  # and again: the refusal left nothing that would let a rerun pass
        with pytest.raises(
            UnusableCheckpointsError,
            match=rf"{tmp_path / 'checkpoints'} holds checkpoints but none is usable.*"
            r"Nothing was changed.*--config.start_over=True",
        ):
            run(tiny_config(**config), tmp_path, dev_eval, every=30)
        assert _files(tmp_path) == before

    _, again = run(tiny_config(**config, start_over=True), tmp_path, dev_eval, every=30)
    assert {"metrics.jsonl", "results.json", "config.json"} <= set(before)
    assert _files(tmp_path / "previous-run-1") == before  # every file, byte for byte
    assert not (tmp_path / "results.json").exists()  # the new run has not reported yet
    assert again.step == 60 and again.best_metric == pytest.approx(first.best_metric, rel=1e-6)
    assert (tmp_path / "metrics.jsonl").read_bytes().count(b"\n") == before["metrics.jsonl"].count(
        b"\n"
    )  # one row per step logged, as in the first run

    # A usable checkpoint is resumed even with start_over: a preempted run's rerun
    # with the same command never starts over.
    _, resumed = run(tiny_config(**config | dict(num_steps=80), start_over=True), tmp_path)
    assert resumed.step == 80 and not (tmp_path / "previous-run-2").exists()


def _train_cli(workdir: Path, *flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "vtfn_jax.train", "--config=configs/demo_bow.py:runlocal"]
    return subprocess.run(
        [*command, f"--workdir={workdir}", *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.slow  # four runs of the training command, each a fresh process (37 s)
def test_the_training_command_on_a_finished_then_damaged_run(tmp_path):
    """Through ``python -m vtfn_jax.train``: a rerun of a finished run trains nothing,
    says so and reports as before (no nan); with every checkpoint damaged it exits
    non-zero naming checkpoints/ and changes nothing; --config.start_over=True keeps
    the old run in previous-run-1 and trains again to the same results."""
    first = _train_cli(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    results = (tmp_path / "results.json").read_text()

    rerun = _train_cli(tmp_path)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "nothing left to train" in rerun.stderr
    assert "nan" not in rerun.stdout.lower() and "| train_examples_per_second |" in rerun.stdout
    assert (tmp_path / "results.json").read_text() == results

    rng = np.random.default_rng(1)
    for step in (p for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()):
        _scramble(step, rng)
    before = _files(tmp_path)
    refused = _train_cli(tmp_path)
    assert refused.returncode != 0
    assert f"error: {tmp_path / 'checkpoints'} holds checkpoints but none is usable" in (
        refused.stderr
    )
    assert "Traceback" not in refused.stderr  # one clear line, not a stack
    assert _files(tmp_path) == before

    again = _train_cli(tmp_path, "--config.start_over=True")
    assert again.returncode == 0, again.stderr[-3000:]
    kept = _files(tmp_path / "previous-run-1")
    for name in ("metrics.jsonl", "results.json", "config.json"):
        assert kept[name] == before[name], name
    assert {n for n in kept if n.startswith("checkpoints/")} == {
        n for n in before if n.startswith("checkpoints/")
    }
    fresh, old = json.loads((tmp_path / "results.json").read_text()), json.loads(results)
    fresh["train"].pop("train_examples_per_second"), old["train"].pop("train_examples_per_second")
    assert fresh == old  # the same config and seed train to the same numbers


def test_a_second_run_on_a_live_workdir_is_refused_naming_the_holder(tmp_path):
    """While one run trains, the same command on its workdir refuses at once, naming
    the holder's host and pid; once the holder is SIGKILLed nothing stale is left."""
    holder = subprocess.Popen(
        [sys.executable, "-c", PREEMPTED_RUN, str(tmp_path), "1000000"],
        cwd=REPO,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while _logged_step(tmp_path / "metrics.jsonl") < 5:
            assert time.monotonic() < deadline and holder.poll() is None, "the run did not start"
            time.sleep(0.1)
        rows_before = (tmp_path / "metrics.jsonl").read_text().count("\n")
        with pytest.raises(
            WorkdirBusyError, match=rf"in use by a live run \(host \S+ pid {holder.pid}\)"
        ):
            run(tiny_config(), tmp_path)
        assert (tmp_path / "metrics.jsonl").read_text().count("\n") >= rows_before  # untouched
    finally:
        holder.kill()
        holder.wait()
    _, resumed = run(tiny_config(num_steps=5), tmp_path)  # the kernel dropped the lock
    assert resumed.step >= 5


def test_a_workdir_from_before_the_single_manager_says_how_to_train_on(tmp_path):
    """Its best/ folder is still what scorers load; training on it is refused with the
    command that converts it."""
    from capsim.checkpoints import find_model_checkpoint
    from capsim.errors import CheckpointError

    run(tiny_config(num_steps=20), tmp_path)
    (tmp_path / "best").mkdir()  # the old layout: best/<step> beside checkpoints/
    (tmp_path / "checkpoints" / "20").rename(tmp_path / "best" / "20")
    assert find_model_checkpoint(tmp_path) == tmp_path / "best"
    with pytest.raises(CheckpointError, match=rf"older version.*mv {tmp_path}/best"):
        run(tiny_config(num_steps=40), tmp_path)
