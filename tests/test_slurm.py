"""Grids and multi-process runs on a real one-node SLURM (tools/local_slurm.py starts
Debian's slurmctld, slurmd and munge under a temporary folder): the job array equals the
local grid (a paper table's grid writes the local grid's table.md), survives ``scontrol requeue`` and its time limit, marks a failing job alone,
runs nothing twice, refuses bad input before submitting; ``launch/slurm.sbatch`` over two
``srun`` tasks equals one process and resumes after a requeue.

Marked ``slurm``: ``python -m pytest -m slurm`` (CI runs it after the slow tier). Where
SLURM cannot start the tests skip with the reason, except under CI (``CI`` set), where
they fail: the scheduler must be met there.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from launch import slurm
from tools import local_slurm

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[1]
SWEEP_VTFN = REPO / "configs" / "sweep_vtfn.py"
TABLE_CONFIG = REPO / "configs" / "tables" / "vtfn_t4_losses.py"
GRID_ARG = "dataset=shapes_world,encoder=bow_sum,loss=pearson"
TOLERANCE = 1e-4
# results.json keys that time the run rather than say what it learned
TIMING = ("examples_per_second", "seconds", "time")
WAIT_SECONDS = 600
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
REQUEUE_SETTLE_SECONDS = 10


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A one-node SLURM for this module's tests; its clients find it through SLURM_CONF."""
    directory = tmp_path_factory.mktemp("slurm")
    try:
        local_slurm.install()
        local_slurm.start(directory)
    except local_slurm.SlurmUnavailable as error:
        if os.environ.get("CI"):
            pytest.fail(f"SLURM must start under CI: {error}")
        pytest.skip(f"no SLURM here: {error}")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("SLURM_CONF", str(directory / local_slurm.CONFIG_FILE))
            yield directory
    finally:
        local_slurm.stop(directory)


def _sweep(workdir: Path, config: str, *flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "launch.sweep", f"--config={config}", f"--workdir={workdir}"]
    return subprocess.run(
        [*command, *flags], cwd=REPO, capture_output=True, text=True, timeout=WAIT_SECONDS
    )


def _slurm_flags(*extra: str) -> list[str]:
    return ["--cluster=slurm", "--wait", "--poll_seconds=1", "--cpus_per_task=1", *extra]


def _long_grid(tmp_path: Path, steps: int, checkpoint_every: int) -> str:
    """The shapes-world BOW grid (runlocal sizes) trained ``steps`` steps, saving often."""
    path = tmp_path / "sweep_long.py"
    path.write_text(
        textwrap.dedent(
            f"""
            from configs import sweep_vtfn as base
            from configs.sweep_vtfn import METRICS, TRAIN_MODULE, get_config


            def get_sweep(hyper, arg=None):
                return hyper.product(
                    [
                        base.get_sweep(hyper, arg),
                        hyper.sweep("config.num_steps", [{steps}]),
                        hyper.sweep("config.checkpoint_every", [{checkpoint_every}]),
                        hyper.sweep("config.early_stopping.patience", [1000]),
                    ]
                )
            """
        )
    )
    return f"{path}:{GRID_ARG},runlocal"


def _learned(value: object) -> object:
    if isinstance(value, dict):
        return {k: _learned(v) for k, v in value.items() if not any(w in k for w in TIMING)}
    return value


def _assert_close(a: object, b: object, where: str) -> None:
    if isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys(), where
        for key in b:
            _assert_close(a[key], b[key], f"{where}.{key}")
    elif isinstance(b, float) and not isinstance(b, bool):
        assert math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE), (where, a, b)
    else:
        assert a == b, (where, a, b)


def _assert_same_grid(workdir: Path, reference: Path) -> None:
    names = sorted(p.parent.name for p in reference.glob("*/results.json"))
    assert names and names == sorted(p.parent.name for p in workdir.glob("*/results.json"))
    for name in names:
        ours, theirs = (
            json.loads((d / name / "results.json").read_text()) for d in (workdir, reference)
        )
        _assert_close(_learned(ours), _learned(theirs), name)


def _table(workdir: Path) -> str:
    return (workdir / "results.md").read_text().replace(str(workdir), "WORKDIR")


def _array_tasks(array_id: str) -> list[str]:
    shown = subprocess.run(
        ["scontrol", "-o", "show", "job", array_id], capture_output=True, text=True
    )
    return [line for line in shown.stdout.splitlines() if f"ArrayJobId={array_id}" in line]


def _submissions(workdir: Path) -> list[dict]:
    return slurm.read_record(workdir)["submissions"]


def test_grid_on_slurm_equals_the_local_grid_and_is_not_run_twice(cluster, tmp_path):
    """seeds=4, --pack 2: one array of 2 tasks; every results.json within 1e-4 of the local
    grid's and the same results.md; the same command again submits nothing."""
    config = f"{SWEEP_VTFN}:{GRID_ARG},seeds=4,runlocal"
    local = _sweep(tmp_path / "local", config, "--pack=2")
    assert local.returncode == 0, local.stderr[-3000:]
    sent = _sweep(tmp_path / "slurm", config, "--pack=2", *_slurm_flags())
    assert sent.returncode == 0, sent.stdout[-3000:] + sent.stderr[-3000:]
    assert "submitted job array" in sent.stdout and "4 done" in sent.stdout
    (submission,) = _submissions(tmp_path / "slurm")
    assert len(submission["tasks"]) == 2
    assert len(_array_tasks(submission["array_job_id"])) == 2  # the scheduler's own word
    _assert_same_grid(tmp_path / "slurm", tmp_path / "local")
    assert _table(tmp_path / "slurm") == _table(tmp_path / "local")

    finished = {p: p.stat().st_mtime_ns for p in (tmp_path / "slurm").glob("*/results.json")}
    again = _sweep(tmp_path / "slurm", config, "--pack=2", *_slurm_flags())
    assert again.returncode == 0, again.stderr[-3000:]
    assert "grid of 4: 4 already done, sending 0" in again.stdout
    assert len(_submissions(tmp_path / "slurm")) == 1
    assert finished == {p: p.stat().st_mtime_ns for p in finished}


def test_a_table_grid_on_slurm_writes_the_local_grids_table(cluster, tmp_path, shared_data):
    """A paper table's config sent with --wait ends as the local grid does (launch.finish):
    the same table.md, and table.json with the same verdicts; --status on the ended grid
    writes them again."""
    arg = f"rows=pearson+covariance,seeds=2,data_dir={shared_data},runlocal"
    config = f"{TABLE_CONFIG}:{arg}"
    local = _sweep(tmp_path / "local", config, "--pack=2")
    assert local.returncode == 0, local.stdout[-3000:] + local.stderr[-3000:]
    sent = _sweep(tmp_path / "slurm", config, "--pack=2", *_slurm_flags())
    assert sent.returncode == 0, sent.stdout[-3000:] + sent.stderr[-3000:]
    assert f"wrote {tmp_path / 'slurm' / 'table.md'}" in sent.stdout
    table = (tmp_path / "local" / "table.md").read_text()
    assert "| Pearson |" in table and "| Covariance |" in table
    assert (tmp_path / "slurm" / "table.md").read_text() == table
    verdicts = [
        [c.get("verdict") for c in json.loads((d / "table.json").read_text())["claims"]]
        for d in (tmp_path / "local", tmp_path / "slurm")
    ]
    assert verdicts[0] == verdicts[1] and len(verdicts[0]) == 3
    (tmp_path / "slurm" / "table.md").unlink()
    status = _sweep(tmp_path / "slurm", "", "--status")
    assert status.returncode == 0, status.stdout[-3000:] + status.stderr[-3000:]
    assert (tmp_path / "slurm" / "table.md").read_text() == table


def _wait_for(predicate, what: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not predicate():
        if process is not None and process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"ended before {what}: {out[-2000:]} {err[-2000:]}")
        assert time.monotonic() < deadline, f"no {what} in {WAIT_SECONDS} s"
        time.sleep(0.2)


def _saved(job_dir: Path) -> bool:
    checkpoints = job_dir / "checkpoints"
    return checkpoints.is_dir() and any(p.name.isdigit() for p in checkpoints.iterdir())


def _start_now(job_id: str) -> None:
    """A requeued job waits SLURM's requeue delay (about two minutes) before it may start
    again; the tests ask for now, as an administrator would, once the node has cleaned up
    after the requeued run (started at once, a task found its old job still completing on
    the node and failed)."""
    time.sleep(REQUEUE_SETTLE_SECONDS)
    shown = subprocess.run(
        ["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True
    )
    for line in shown.stdout.splitlines():
        if "JobState=PENDING" in line:
            task_id = line.split("JobId=")[1].split()[0]
            subprocess.run(["scontrol", "update", f"JobId={task_id}", "StartTime=now"], check=False)


def test_requeue_of_running_tasks_resumes_to_the_uninterrupted_grid(cluster, tmp_path):
    """``scontrol requeue`` once a member has saved: SLURM's SIGTERM saves every member at
    one step, the task starts again, resumes them, and the grid equals the uninterrupted one."""
    config = _long_grid(tmp_path, steps=400, checkpoint_every=40)
    whole = _sweep(tmp_path / "whole", f"{config},seeds=2", "--pack=2")
    assert whole.returncode == 0, whole.stderr[-3000:]
    workdir = tmp_path / "requeued"
    process = subprocess.Popen(
        [sys.executable, "-m", "launch.sweep", f"--config={config},seeds=2",
         f"--workdir={workdir}", "--pack=2", *_slurm_flags()],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    _wait_for(lambda: any(_saved(d) for d in workdir.glob("*seed=*")), "checkpoint", process)
    (submission,) = _submissions(workdir)
    array_id = submission["array_job_id"]
    assert not any((d / "results.json").exists() for d in workdir.glob("*seed=*"))
    requeue = subprocess.run(["scontrol", "requeue", array_id], capture_output=True, text=True)
    assert requeue.returncode == 0, requeue.stderr
    _wait_for(lambda: "JobState=PENDING" in "".join(_array_tasks(array_id)), "requeue")
    status = _sweep(workdir, "", "--status")
    assert "requeued" in status.stdout, status.stdout
    _start_now(array_id)
    out, err = process.communicate(timeout=WAIT_SECONDS)
    assert process.returncode == 0, out[-3000:] + err[-3000:]
    log = next((workdir / "slurm" / "logs").glob("*_0.out")).read_text()
    assert "start 1" in log and "start 2" in log and "SIGTERM" in log
    _assert_same_grid(workdir, tmp_path / "whole")


def test_time_limit_signal_saves_requeues_and_resumes(cluster, tmp_path):
    """A task whose time limit comes before its end: SIGUSR1 (asked for --signal_seconds
    before the limit) saves the members, the task requeues itself and finishes later,
    equal to the uninterrupted grid; a task that needs more starts than --max_requeues
    allows stops as failed instead of being requeued for ever."""
    config = _long_grid(tmp_path, steps=1500, checkpoint_every=100)
    whole = _sweep(tmp_path / "whole", config, "--pack=1")
    assert whole.returncode == 0, whole.stderr[-3000:]
    workdir = tmp_path / "limited"
    flags = ["--pack=1", "--time=1", "--signal_seconds=50", "--max_requeues=8"]
    process = subprocess.Popen(
        [sys.executable, "-m", "launch.sweep", f"--config={config}", f"--workdir={workdir}",
         *_slurm_flags(*flags)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    logs = workdir / "slurm" / "logs"

    def requeued_or_done() -> bool:
        text = "".join(p.read_text() for p in logs.glob("*.out")) if logs.is_dir() else ""
        if "== requeued" in text and "JobState=PENDING" in "".join(
            _array_tasks(_submissions(workdir)[0]["array_job_id"])
        ):
            _start_now(_submissions(workdir)[0]["array_job_id"])
        return process.poll() is not None

    _wait_for(requeued_or_done, "the end of the grid")
    out, err = process.communicate()
    assert process.returncode == 0, out[-3000:] + err[-3000:]
    log = next(logs.glob("*_0.out")).read_text()
    assert "time limit near" in log and "== requeued" in log and "start 2" in log
    _assert_same_grid(workdir, tmp_path / "whole")

    capped = tmp_path / "capped"  # no requeue allowed: saved at the limit, then failed
    flags = ["--pack=1", "--time=1", "--signal_seconds=50", "--max_requeues=0"]
    done = _sweep(capped, config, *_slurm_flags(*flags))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    log = next((capped / "slurm" / "logs").glob("*_0.out")).read_text()
    assert "time limit near" in log and "not requeued: started 1 times" in log
    assert "| failed |" in done.stdout and not list(capped.glob("*/results.json"))
    # saved at the signal (exit 0), or the signal came during start-up (SIGTERM's 143)
    saved = any(_saved(job) for job in capped.glob("dataset=*"))
    assert ("== exit 0;" in log and saved) or "== exit 143;" in log, log


def test_a_failing_job_marks_only_itself(cluster, tmp_path):
    """A job with a bad value (an unknown loss) fails in --status and in the table, with its
    log's last line; the other jobs finish."""
    config = tmp_path / "sweep_bad.py"
    config.write_text(
        textwrap.dedent(
            """
            from configs import sweep_vtfn
            from configs.sweep_vtfn import METRICS, TRAIN_MODULE, get_config


            def get_sweep(hyper, arg=None):
                return [{"config.loss.name": "no_such_loss"}, *sweep_vtfn.get_sweep(hyper, arg)]
            """
        )
    )
    workdir = tmp_path / "grid"
    sent = _sweep(workdir, f"{config}:{GRID_ARG},seeds=2,runlocal", "--pack=2", *_slurm_flags())
    assert sent.returncode == 1, sent.stdout[-3000:] + sent.stderr[-3000:]
    status = _sweep(workdir, "", "--status")
    rows = {line.split("|")[1].strip(): line for line in status.stdout.splitlines() if "|" in line}
    assert "| failed |" in rows["loss=no_such_loss"] and "no_such_loss" in rows["loss=no_such_loss"]
    good = [name for name in rows if name.startswith("dataset=")]
    assert len(good) == 2 and all("| done |" in rows[name] for name in good)
    table = (workdir / "results.md").read_text()
    assert "| no_such_loss |" in table and "failed" in table


def test_bad_input_is_refused_before_anything_is_submitted(cluster, tmp_path):
    """An unknown --slurm key, a key the script sets itself, and a workdir that a live grid
    owns: one clear line each, exit 2, nothing submitted (no sbatch on the PATH:
    tests/test_slurm_script.py)."""
    config = f"{SWEEP_VTFN}:{GRID_ARG},runlocal"
    workdir = tmp_path / "grid"
    for key, message in (("colour=blue", "not an option of"), ("array=0-3", "set by the grid")):
        done = _sweep(workdir, config, "--cluster=slurm", f"--slurm={key}")
        assert done.returncode == 2 and message in done.stderr, done.stderr
        assert key.split("=")[0] in done.stderr and "Traceback" not in done.stderr
    assert not workdir.exists()

    held = _sweep(workdir, config, "--cluster=slurm", "--slurm=hold")  # queued, never runs
    assert held.returncode == 0, held.stderr
    (submission,) = _submissions(workdir)
    try:
        again = _sweep(workdir, config, "--cluster=slurm")
        assert again.returncode == 2 and "belongs to a grid still in the queue" in again.stderr
        assert submission["array_job_id"] in again.stderr
        assert len(_submissions(workdir)) == 1
        status = _sweep(workdir, "", "--status")
        assert "pending" in status.stdout and not (workdir / "results.md").exists()
    finally:
        subprocess.run(["scancel", submission["array_job_id"]], check=False)


def _losses(run: Path) -> dict[int, float]:
    rows = (json.loads(line) for line in (run / "metrics.jsonl").open())
    return {row["step"]: row["train/loss"] for row in rows if "train/loss" in row}


def _sbatch(*args: str) -> str:
    done = subprocess.run(
        ["sbatch", "--parsable", *args], cwd=REPO, capture_output=True, text=True, check=True
    )
    return done.stdout.strip().split(";")[0]


def _job_state(job_id: str) -> str:
    shown = subprocess.run(
        ["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True
    )
    return shown.stdout.split("JobState=")[1].split()[0] if "JobState=" in shown.stdout else ""


def test_slurm_sbatch_two_srun_tasks_equal_one_process_and_resume(cluster, tmp_path):
    """launch/slurm.sbatch as it is, with --ntasks=2 on the one node: jax.distributed from
    SLURM's variables over gloo, the same losses as one process to 1e-5; a requeue of the
    job once it has saved resumes it to the same losses."""
    config = "configs/demo_bow.py:runlocal"
    steps = ["--config.num_steps=300", "--config.checkpoint_every=30"]
    one = subprocess.run(
        [sys.executable, "-m", "vtfn_jax.train", f"--config={config}",
         f"--workdir={tmp_path / 'one'}", *steps],
        cwd=REPO, capture_output=True, text=True, timeout=WAIT_SECONDS,
    )  # fmt: skip
    assert one.returncode == 0, one.stderr[-3000:]
    runs = {}
    for name in ("two", "requeued"):
        output = tmp_path / f"{name}.out"
        job_id = _sbatch(
            "--ntasks=2", "--cpus-per-task=1", f"--output={output}",
            "launch/slurm.sbatch", config, str(tmp_path / name), *steps,
        )  # fmt: skip
        if name == "requeued":
            _wait_for(lambda: _saved(tmp_path / "requeued"), "checkpoint")
            subprocess.run(["scontrol", "requeue", job_id], check=True)
            _wait_for(lambda job_id=job_id: _job_state(job_id) == "PENDING", "requeue")
            _start_now(job_id)
        _wait_for(lambda job_id=job_id: _job_state(job_id) in ENDED, "the job's end")
        log = output.read_text()
        assert _job_state(job_id) == "COMPLETED", log[-3000:]
        assert "Rank 1 is connected to 1 peer" in log  # two processes, joined by gloo
        runs[name] = _losses(tmp_path / name)
        if name == "requeued":
            assert "start 2" in log
    reference = _losses(tmp_path / "one")
    assert sorted(reference) == sorted(runs["two"]) == sorted(runs["requeued"])
    for step, loss in reference.items():
        for name in runs:
            assert runs[name][step] == pytest.approx(loss, rel=1e-5, abs=1e-5), (name, step)
