"""launch/tpu_vm.sh and launch/slurm.sbatch: valid bash, usage errors, and the commands they run.

The TPU script runs against a stand-in ``gcloud`` that records what each worker would
run (no TPU here). The SLURM script runs on a real one-node SLURM in tests/test_slurm.py.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
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
