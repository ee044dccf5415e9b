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
from test_kill_resume import NUM_STEPS, Run, _check_same_run, _logged_step
from test_trainer import PREEMPTED_RUN, dev_eval, run, tiny_config

from capsim.train.faults import PEER_FAILURE_EXIT_CODE
from capsim.train.lock import WorkdirBusyError

REPO = Path(__file__).resolve().parents[1]
PREEMPTION_DEADLINE_S = 60  # the bound for every process to save and exit


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    workdir = tmp_path_factory.mktemp("uninterrupted")
    reference = Run(workdir, NUM_STEPS, 2)
    assert reference.wait() == [0, 0], reference.stderr(0)[-3000:]
    return workdir


def _wait_for_step(run_: Run, step: int) -> None:
    deadline = time.monotonic() + 300
    while _logged_step(run_.workdir / "metrics.jsonl") < step:
        if any(p.poll() is not None for p in run_.procs) or time.monotonic() > deadline:
            run_.kill_all()
            pytest.fail(f"the run stopped before step {step}: {run_.stderr(0)[-2000:]}")
        time.sleep(0.01)


@pytest.mark.parametrize("signalled", [1, 0])
def test_sigterm_to_one_process_stops_both_at_one_step_and_resumes_exactly(
    tmp_path, uninterrupted, signalled
):
    """Whichever host gets the notice, both save the same step and exit 0; the same
    command then finishes the run as if never stopped."""
    workdir = tmp_path / "preempted"
    preempted = Run(workdir, NUM_STEPS, 2, CHECKPOINT_EVERY=str(10**9))
    _wait_for_step(preempted, 30)
    preempted.procs[signalled].send_signal(signal.SIGTERM)
    start = time.monotonic()
    codes = preempted.wait(timeout=PREEMPTION_DEADLINE_S)
    assert time.monotonic() - start < PREEMPTION_DEADLINE_S
    assert codes == [0, 0], [preempted.stderr(r)[-2000:] for r in (0, 1)]
    saved = {
        int(re.search(r"saved a checkpoint at step (\d+)", preempted.stderr(r)).group(1))
        for r in (0, 1)
    }
    assert len(saved) == 1, saved  # both processes name the same step
    steps = [p.name for p in (workdir / "checkpoints").iterdir() if p.name.isdigit()]
    assert steps == [str(saved.pop())]  # one checkpoint, at that step
    assert _logged_step(workdir / "metrics.jsonl") < NUM_STEPS

    resumed = Run(workdir, NUM_STEPS, 2)
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
    from capsim.errors import CheckpointError
    from capsim.train.checkpoint import find_model_checkpoint

    run(tiny_config(num_steps=20), tmp_path)
    (tmp_path / "best").mkdir()  # the old layout: best/<step> beside checkpoints/
    (tmp_path / "checkpoints" / "20").rename(tmp_path / "best" / "20")
    assert find_model_checkpoint(tmp_path) == tmp_path / "best"
    with pytest.raises(CheckpointError, match=rf"older version.*mv {tmp_path}/best"):
        run(tiny_config(num_steps=40), tmp_path)
