"""launch/tpu_vm.sh and launch/slurm.sbatch: valid bash, usage errors, and the commands they run.

SLURM's training command is read out of the sbatch file and run as two local CPU
processes joined by jax.distributed (gloo), as srun would start two tasks; the TPU
script runs against a stand-in ``gcloud`` that records what each worker would run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SLURM = REPO / "launch" / "slurm.sbatch"
TPU_VM = REPO / "launch" / "tpu_vm.sh"
DTYPE_FLAG = "--config.model.dtype=bfloat16"


@pytest.mark.parametrize("script", [SLURM, TPU_VM], ids=lambda p: p.name)
def test_launch_script_is_valid_bash(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("script", [SLURM, TPU_VM], ids=lambda p: p.name)
def test_launch_script_without_arguments_prints_usage(script):
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "usage:" in proc.stderr


def slurm_task_command() -> str:
    """The command each SLURM task runs: the sbatch file's srun line without srun's options."""
    script = SLURM.read_text().replace("\\\n", " ")
    lines = [line for line in script.splitlines() if line.startswith("srun ")]
    assert len(lines) == 1, f"expected one srun line in {SLURM}, found {lines}"
    return re.sub(r"^srun(\s+-\S+)*\s+", "", lines[0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # two training processes from the sbatch line (22 s); fast: test_multihost
def test_slurm_command_trains_as_two_processes(tmp_path):
    command = slurm_task_command()
    assert command.startswith("python -m ")
    workdir = tmp_path / "run"
    port = _free_port()
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        JAX_PLATFORMS="cpu",
        JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo",
        JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
        JAX_NUM_PROCESSES="2",
        MODULE="vtfn_jax.train",
    )
    args = ["configs/demo_bow.py:runlocal", str(workdir), "--config.num_steps=3", DTYPE_FLAG]
    procs = [
        subprocess.Popen(
            ["bash", "-c", f"set -euo pipefail; {command}", "slurm_task", *args],
            cwd=REPO,
            env=dict(env, JAX_PROCESS_ID=str(rank)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    config = json.loads((workdir / "config.json").read_text())
    assert config["num_steps"] == 3 and config["model"]["dtype"] == "bfloat16"
    results = json.loads((workdir / "results.json").read_text())
    assert results["train"]["steps"] == 3
    assert (workdir / "checkpoints").is_dir()


def test_tpu_vm_runs_the_trainer_on_every_worker_with_extra_flags(tmp_path):
    """A stand-in gcloud records the remote commands; the trainer flags survive the quoting."""
    calls_dir = tmp_path / "calls"  # one file per gcloud call, its arguments NUL-separated
    calls_dir.mkdir()
    gcloud = tmp_path / "bin" / "gcloud"
    gcloud.parent.mkdir()
    record = shlex.quote(str(calls_dir))
    gcloud.write_text(f'#!/bin/bash\nprintf "%s\\0" "$@" > {record}/$(ls {record} | wc -l)\n')
    gcloud.chmod(gcloud.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH=f"{gcloud.parent}{os.pathsep}{os.environ['PATH']}")
    env["MODULE"] = "i2ce_jax.train"
    config = "configs/i2ce_coco_margin.py:data_dir=/mnt/data"
    proc = subprocess.run(
        [
            "bash",
            str(TPU_VM),
            "my-v5e-8",
            "us-west4-a",
            config,
            "/mnt/runs/x",
            DTYPE_FLAG,
            "--x=a b",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    calls = [
        (calls_dir / str(i)).read_text().split("\0") for i in range(len(list(calls_dir.iterdir())))
    ]
    assert len(calls) == 2 and all("--worker=all" in call for call in calls)
    commands = [
        next(arg for arg in call if arg.startswith("--command=")).removeprefix("--command=")
        for call in calls
    ]
    assert "jax[tpu]" in commands[0]
    train = shlex.split(commands[1].removeprefix("cd capsim && "))
    assert train[1:] == [
        "-m",
        "i2ce_jax.train",
        f"--config={config}",
        "--workdir=/mnt/runs/x",
        DTYPE_FLAG,
        "--x=a b",
    ]
