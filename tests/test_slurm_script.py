"""launch.slurm without a scheduler: the batch script it writes, the options it reads, the
error where sbatch is missing, and ``--status`` on a local grid. The scheduler itself is
met in tests/test_slurm.py (marked ``slurm``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launch import slurm, sweep
from launch.grid import Job
from launch.tasks import Task

REPO = Path(__file__).resolve().parents[1]


def _script(tmp_path: Path, **resources: object) -> str:
    packed = Job("j=0,k", {}, {})
    tasks = [
        Task(
            (packed,),
            ["python", "-m", "launch.pack", "--config=c.py:a=1,b=x y", str(tmp_path / "j=0,k")],
            tmp_path,
            packed=True,
        ),
        Task((Job("j=1", {}, {}),), ["python", "-m", "t"], tmp_path),
    ]
    assert tasks[0].log == tmp_path / "packs" / "j=0,k.log"  # where a local grid puts it
    assert tasks[1].log == tmp_path / "j=1" / "log.txt"
    return slurm.script_text(tasks, slurm.Resources(**resources), REPO, tmp_path / "logs")


def test_the_batch_script_is_valid_bash_with_the_array_and_its_signal(tmp_path):
    text = _script(
        tmp_path,
        partition="gpu",
        time="4:00:00",
        gpus_per_task=1,
        max_running=3,
        signal_seconds=120,
        max_requeues=5,
        extra={"qos": "high", "exclusive": None},
    )
    path = tmp_path / "grid.sbatch"
    path.write_text(text)
    checked = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    directives = [
        line.split(maxsplit=1)[1] for line in text.splitlines() if line.startswith("#SBATCH")
    ]
    for expected in (
        "--array=0-1%3",
        "--ntasks=1",
        "--requeue",
        "--signal=B:USR1@120",
        "--open-mode=append",
        "--partition=gpu",
        "--time=4:00:00",
        "--gpus-per-task=1",
        "--qos=high",
        "--exclusive",
        f"--chdir={REPO}",
    ):
        assert expected in directives
    assert "MAX_REQUEUES=5" in text
    # a folder name with commas and '=' and an argument with a space survive bash's quoting
    assert "'--config=c.py:a=1,b=x y'" in text and "JOB_DIRS=(" in text


def test_the_script_refuses_to_run_outside_a_job_array(tmp_path):
    path = tmp_path / "grid.sbatch"
    path.write_text(_script(tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run(["bash", str(path)], capture_output=True, text=True, env=env)
    assert done.returncode != 0 and "run this script with sbatch" in done.stderr


def test_the_requeue_logic_is_one_file_that_both_scripts_run(tmp_path):
    """launch/requeue.sh is copied into the array script and sourced by slurm.sbatch; run
    here with a stand-in scontrol: SIGUSR1 saves (the command's SIGTERM), then the task
    requeues itself while a job is unfinished, at most MAX_REQUEUES times."""
    requeue = (REPO / "launch" / "requeue.sh").read_text()
    assert requeue.rstrip("\n") in _script(tmp_path)
    sbatch = (REPO / "launch" / "slurm.sbatch").read_text()
    assert 'source "${SLURM_SUBMIT_DIR:-.}/launch/requeue.sh"' in sbatch
    assert "trap" not in sbatch.replace("requeue.sh", "")  # no second copy of the logic
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text('#!/bin/bash\necho "scontrol $*"\n')
    (bin_dir / "scontrol").chmod(0o755)
    job = Job("j", {}, {})
    started = tmp_path / "started"
    command = ["bash", "-c", f"trap 'exit 0' TERM; touch {started}; sleep 60 & wait"]
    task = Task((job,), command, tmp_path, packed=True)
    text = slurm.script_text([task], slurm.Resources(max_requeues=1), REPO, tmp_path / "logs")
    (tmp_path / "grid.sbatch").write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", SLURM_JOB_ID="7", SLURM_ARRAY_JOB_ID="7")
    for restarts, ends in ((0, "requeued to resume (start 2 of at most 2)"), (1, "not requeued")):
        started.unlink(missing_ok=True)
        env.update(SLURM_ARRAY_TASK_ID="0", SLURM_RESTART_COUNT=str(restarts))
        shell = subprocess.Popen(
            ["bash", str(tmp_path / "grid.sbatch")], stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(200):
            if started.exists():
                break
            time.sleep(0.05)
        shell.send_signal(signal.SIGUSR1)
        out, _ = shell.communicate(timeout=30)
        assert "time limit near" in out and "== exit 0; 1 of 1 jobs unfinished" in out, out
        assert ends in out and ("scontrol requeue 7" in out) == (restarts == 0), out
        assert shell.returncode == (0 if restarts == 0 else 1), out
    assert task.log.exists()


def test_slurm_options_are_read_as_sbatch_spells_them():
    assert slurm.parse_slurm_options(["mail_type=END", "exclusive", "--qos=a=b"]) == {
        "mail-type": "END",
        "exclusive": None,
        "qos": "a=b",
    }
    with pytest.raises(slurm.SlurmError, match="KEY=VALUE"):
        slurm.parse_slurm_options(["=x"])


def test_no_sbatch_on_the_path_is_one_line_and_nothing_is_written(tmp_path):
    workdir = tmp_path / "grid"
    config = f"{REPO / 'configs' / 'sweep_vtfn.py'}:dataset=shapes_world,encoder=bow_sum"
    done = subprocess.run(
        [sys.executable, "-m", "launch.sweep", f"--config={config}", f"--workdir={workdir}",
         "--cluster=slurm"],
        cwd=REPO, capture_output=True, text=True,
        env=dict(os.environ, PATH=str(Path(sys.executable).parent)),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "no sbatch on the PATH" in done.stderr and "Traceback" not in done.stderr
    assert not workdir.exists()


def test_status_of_a_local_grid_reads_its_folders(tmp_path, capsys):
    for name, returncode, results in (("a", 0, True), ("b", 1, False), ("c", None, False)):
        job = tmp_path / name
        job.mkdir()
        record = {"name": name, "params": {}, "command": []}
        if returncode is not None:
            record["returncode"] = returncode
        (job / "job.json").write_text(json.dumps(record))
        (job / "log.txt").write_text(f"first\nlast line of {name}\n")
        if results:
            (job / "results.json").write_text("{}")
    assert sweep.main(["--status", f"--workdir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if "|" in line}
    assert "| done |" in rows["a"]
    assert "| failed |" in rows["b"] and "last line of b" in rows["b"]
    assert "| not run |" in rows["c"]
    assert sweep.main(["--status", f"--workdir={tmp_path / 'none'}"]) == 2
