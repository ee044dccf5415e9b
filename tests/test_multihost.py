"""One I2CE training, three layouts: 2 and 4 processes on localhost (jax.distributed over
gloo) and 8 devices in one process each give the losses of one process on one device."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import requires

REPO = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, sys
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
from configs import i2ce_demo
from i2ce_jax.train import train_and_evaluate
config = i2ce_demo.get_config("runlocal")
config.num_steps, config.log_every, config.evals.dev.every = 3, 1, 3
summary = train_and_evaluate(config, sys.argv[1])
if jax.process_index() == 0:
    losses = [json.loads(l)["train/loss"] for l in open(sys.argv[1] + "/metrics.jsonl") if "train/loss" in l]
    print("LOSSES", json.dumps(losses), "TAU", summary["judgments"]["I2CE"])
"""


pytestmark = requires("jax")  # each process trains with JAX


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(workdir: Path, env_extra: dict) -> subprocess.Popen:
    env = dict(os.environ, JAX_PLATFORMS="cpu", **env_extra)
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(workdir)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen) -> tuple[list[float], float]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    line = out.split("LOSSES", 1)[1]
    losses, tau = line.split("TAU")
    return json.loads(losses), float(tau)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> tuple[list[float], float]:
    """The 3 steps on one process and one device, which every other layout must match."""
    return _result(_start(tmp_path_factory.mktemp("single"), {}))


@pytest.mark.slow  # 8 devices on 2 cores (28 s), as 4 processes below
def test_eight_devices_in_one_process_match_one(one_process, tmp_path):
    flags = os.environ.get("XLA_FLAGS", "")  # conftest's, and the devices
    eight = _result(
        _start(tmp_path, {"XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count=8"})
    )
    assert len(one_process[0]) == 3
    np.testing.assert_allclose(eight[0], one_process[0], atol=1e-5, rtol=1e-5)


# 4 processes on 2 cores are slow by nature (70 s): the slow tier
@pytest.mark.parametrize("num_processes", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_several_processes_match_one(one_process, tmp_path, num_processes):
    port = _free_port()
    procs = [
        _start(
            tmp_path / "multi",
            {
                "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
                "JAX_NUM_PROCESSES": str(num_processes),
                "JAX_PROCESS_ID": str(i),
            },
        )
        for i in range(num_processes)
    ]
    multi = _result(procs[0])
    for proc in procs[1:]:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
    np.testing.assert_allclose(multi[0], one_process[0], rtol=1e-5)
    np.testing.assert_allclose(multi[1], one_process[1], atol=1e-3)
    assert (tmp_path / "multi" / "checkpoints").is_dir()
