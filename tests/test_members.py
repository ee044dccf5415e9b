"""capsim.train.members: a pack's members as one vmapped program. Which members may share
it, how the mode is chosen, the memory check, early stopping of one member beside the
others, and the member axis beside a 2-process data mesh."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import ml_collections
import numpy as np
import optax
import pytest
from conftest import requires

pytestmark = requires("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

from capsim import config_lib  # noqa: E402
from capsim.encoders import BowEncoder  # noqa: E402
from capsim.train import members  # noqa: E402
from capsim.train.optimizer import make_optimizer  # noqa: E402
from capsim.train.recipe import train_and_evaluate_pack  # noqa: E402
from configs import demo_bow  # noqa: E402
from vtfn_jax.train import declare  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_the_optimizer_with_its_numbers_in_its_state_is_the_optax_chain():
    """make_optimizer keeps learning rate, decay and L2 in its state (inject_hyperparams)
    and updates as optax's clip, L2 and Adam over exponential_decay, bit for bit."""
    config = ml_collections.ConfigDict(
        dict(
            optimizer=dict(
                learning_rate=3e-3, decay_rate=0.5, decay_steps=7, l2=1e-4, clip_norm=0.5
            )
        )
    )
    ours = make_optimizer(config)
    reference = optax.chain(
        optax.clip_by_global_norm(0.5),
        optax.add_decayed_weights(1e-4),
        optax.adam(optax.exponential_decay(3e-3, 7, 0.5)),
    )
    params = {"w": jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)}
    states, values = [ours.init(params), reference.init(params)], [params, params]
    for step in range(20):
        for k, tx in enumerate((ours, reference)):
            grads = {"w": jnp.cos(values[k]["w"] * (step + 1))}
            updates, states[k] = tx.update(grads, states[k], values[k])
            values[k] = optax.apply_updates(values[k], updates)
    np.testing.assert_array_equal(values[0]["w"], values[1]["w"])
    assert float(states[0].hyperparams["learning_rate"]) == pytest.approx(3e-3)


def _config(**changes) -> ml_collections.ConfigDict:
    config = demo_bow.get_config("runlocal")
    config.unlock()
    for key, value in changes.items():
        target = config
        *parents, leaf = key.split(".")
        for part in parents:
            target = target[part]
        target[leaf] = value
    return config


def test_members_that_differ_in_a_constant_of_the_step_are_named():
    a, b = _config(seed=0), _config(**{"seed": 1, "optimizer.learning_rate": 0.1})
    assert members.vmapped_differences([a, b]) == []
    c = _config(**{"loss.name": "covariance"})
    assert members.vmapped_differences([a, c]) == [
        "loss.name: 'pearson' (member 1), 'covariance' (member 2)"
    ]
    model = BowEncoder(50, 8, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"loss\.name: 'pearson' \(member 1\)"):
        members.PackTrainer([a, c], [model, model], lambda *args: (0.0, {}))


def test_one_function_decides_which_members_share_a_program():
    """``programs``: configs equal but for the vmapped keys (every optimizer number the
    optimizer declares among them), models of one structure and sizes, equal tables."""
    base = _config()
    optimizer_numbers = [
        _config(**{f"optimizer.{name}": base.optimizer[name] * 2 + 1})
        for name in config_lib.HYPERPARAMETERS
    ]
    configs = [base, *optimizer_numbers, _config(**{"loss.name": "covariance"}), base, base]
    models = [BowEncoder(50, 8, rngs=nnx.Rngs(k)) for k in range(len(configs) - 1)]
    models.append(BowEncoder(60, 8, rngs=nnx.Rngs(0)))  # another vocabulary
    tables = [None] * (len(configs) - 2) + [{"rows": np.ones(3)}, None]
    together = list(range(len(optimizer_numbers) + 1))
    last = len(together)
    assert members.programs(configs, models, tables) == [together, [last], [last + 1], [last + 2]]


def test_a_pack_holds_one_copy_of_its_members_state():
    """The stack is the members' state: their models keep only shapes meanwhile."""
    models = [BowEncoder(50, 8, rngs=nnx.Rngs(k)) for k in range(2)]
    initial = jax.tree.leaves(nnx.state(models[1]))
    configs = [_config(seed=k) for k in range(2)]
    pack = members.PackTrainer(configs, models, lambda *args: (0.0, {}))
    for model in models:
        assert all(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(nnx.state(model)))
    assert all(x.shape[0] == 2 for x in jax.tree.leaves(pack.state))
    pack.members[1].keep_trained()  # as fit ends: the member's row back in its model
    for kept, before, rows in zip(
        jax.tree.leaves(nnx.state(models[1])), initial, jax.tree.leaves(pack.state[0]), strict=True
    ):
        np.testing.assert_array_equal(kept, before)
        np.testing.assert_array_equal(kept, rows[1])


def test_the_member_mode_follows_the_measured_rule():
    small_bow = BowEncoder(500, 32, rngs=nnx.Rngs(0))
    large_bow = BowEncoder(10_000, 300, rngs=nnx.Rngs(0))
    gru = nnx.RNN(nnx.GRUCell(8, 16, rngs=nnx.Rngs(0)))
    assert members.member_mode(small_bow, "cpu") == "vmapped"
    assert members.member_mode(large_bow, "cpu") == "in_turn"  # 3M parameters
    assert members.member_mode(gru, "cpu") == "in_turn"  # a scan
    assert members.member_mode(gru, "gpu") == "vmapped"
    assert members.member_mode(large_bow, "tpu") == "vmapped"


def _run(tmp_path: Path, name: str, changes: list[dict], mode: str = "vmapped") -> list:
    configs = [_config(**c) for c in changes]
    dirs = [tmp_path / name / f"m{k}" for k in range(len(configs))]
    return train_and_evaluate_pack(configs, dirs, declare, mode)


def _rows(job_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (job_dir / "metrics.jsonl").open()]
    return [{k: v for k, v in r.items() if "per_second" not in k} for r in rows]


@pytest.mark.slow  # 3 packs of 2 demo members, 60 steps (about 40 s)
def test_early_stopping_of_one_member_leaves_the_other_unchanged(tmp_path):
    """Member 1 stops early (patience 1, an evaluation every 5 steps) while member 2 trains
    on: member 2's every logged number equals its run beside a member that never stops,
    and the stopped member's best checkpoint is kept."""
    common = {"num_steps": 60, "log_every": 5, "evals.dev.every": 5}
    other = {**common, "optimizer.learning_rate": 3e-3}  # one seed: one vocabulary, one program
    stopping = [{**common, "early_stopping.patience": 1, "optimizer.learning_rate": 0.3}, other]
    never = [{**common, "early_stopping.patience": 1000}, other]
    stopped = _run(tmp_path, "stops", stopping)
    _run(tmp_path, "never", never)
    assert stopped[0]["train"]["stopped_early"] and stopped[0]["train"]["steps"] < 60
    assert stopped[1]["train"]["steps"] == 60
    assert stopped[1]["pack"] == {"mode": "vmapped", "members": 2, "index": 1}
    assert _rows(tmp_path / "stops" / "m1") == _rows(tmp_path / "never" / "m1")
    evaluated = [r for r in _rows(tmp_path / "stops" / "m0") if "dev/same_image_auc" in r]
    best = max(evaluated, key=lambda r: r["dev/same_image_auc"])
    assert best["dev/same_image_auc"] == stopped[0]["train"]["best_dev_same_image_auc"]
    assert (tmp_path / "stops" / "m0" / "checkpoints" / str(best["step"])).is_dir()


def test_members_that_do_not_fit_stop_before_training_with_the_sizes(tmp_path, monkeypatch):
    monkeypatch.setattr(members, "free_device_bytes", lambda device: 1 << 10)
    changes = [{"num_steps": 5, "optimizer.learning_rate": lr} for lr in (1e-3, 3e-3)]
    outcomes = _run(tmp_path, "tight", changes)
    assert all(isinstance(outcome, members.MemoryFitError) for outcome in outcomes)
    assert "2 vmapped member(s) need" in str(outcomes[0])
    member = tmp_path / "tight" / "m0"  # not one step trained, nothing saved
    assert not list(member.glob("checkpoints/[0-9]*"))
    assert not (member / "metrics.jsonl").exists() or not (member / "metrics.jsonl").read_text()


def test_an_automatic_pack_size_splits_members_to_fit(tmp_path, monkeypatch, caplog):
    """Free memory for one member's program but not two's: with ``fit_memory`` the pack
    trains as two programs of one member, says so, and each member is still its run."""
    real_program_bytes, programs = members.program_bytes, []

    def recorded(compiled):
        programs.append(real_program_bytes(compiled))
        return programs[-1]

    def free(device):  # the first (2-member) program lacks one byte; later ones fit
        return programs[0][1] - 1 if len(programs) == 1 else 1 << 40

    monkeypatch.setattr(members, "program_bytes", recorded)
    monkeypatch.setattr(members, "free_device_bytes", free)
    configs = [_config(num_steps=5, **{"optimizer.learning_rate": lr}) for lr in (1e-3, 3e-3)]
    dirs = [tmp_path / f"m{k}" for k in range(2)]
    results = train_and_evaluate_pack(configs, dirs, declare, "vmapped", fit_memory=True)
    assert "pack size auto: 1 members a program" in caplog.text
    assert [r["pack"] for r in results] == [{"mode": "vmapped", "members": 1, "index": 0}] * 2
    assert [r["train"]["steps"] for r in results] == [5, 5]


def test_the_profiler_traces_a_packs_steps(tmp_path):
    """The pack steps in the solo run's loop (capsim.train.loop.train_runs), profiler
    included: the trace is in the first member's workdir."""
    steps = {"num_steps": 3, "profile_steps": "1:2", "evals.dev.every": 0}
    _run(tmp_path, "traced", [{**steps, "optimizer.learning_rate": lr} for lr in (1e-3, 3e-3)])
    assert list((tmp_path / "traced" / "m0" / "profile").rglob("*.xplane.pb"))


PACK_SCRIPT = """
import json, sys
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
from configs import i2ce_demo
from i2ce_jax.train import declare
from capsim.train.recipe import train_and_evaluate_pack
configs = []
for seed, lr in ((0, 1e-3), (1, 3e-3)):
    config = i2ce_demo.get_config("runlocal")
    config.num_steps, config.log_every, config.evals.dev.every = 3, 1, 3
    config.seed, config.optimizer.learning_rate = seed, lr
    configs.append(config)
dirs = [sys.argv[1] + "/a", sys.argv[1] + "/b"]
train_and_evaluate_pack(configs, dirs, declare, "vmapped")
if jax.process_index() == 0:
    losses = [[json.loads(l)["train/loss"] for l in open(d + "/metrics.jsonl") if "train/loss" in l]
              for d in dirs]
    print("LOSSES", json.dumps(losses))
"""


def _start_pack(workdir: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PACK_SCRIPT, str(workdir)],
        cwd=REPO,
        env=dict(os.environ, JAX_PLATFORMS="cpu", **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _losses(process: subprocess.Popen) -> list[list[float]]:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    return json.loads(out.split("LOSSES", 1)[1])


@pytest.mark.slow  # 3 processes of I2CE members (about 40 s)
def test_vmapped_members_on_two_processes_match_one(tmp_path):
    """The member axis beside the data mesh: 2 vmapped I2CE members, their batch split
    over 2 processes (jax.distributed over gloo), log one process's losses."""
    from test_multihost import _free_port

    one = _losses(_start_pack(tmp_path / "one", {}))
    port = _free_port()
    env = {"JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2"}
    processes = [_start_pack(tmp_path / "two", {**env, "JAX_PROCESS_ID": str(k)}) for k in range(2)]
    two = _losses(processes[0])
    _, err = processes[1].communicate(timeout=600)
    assert processes[1].returncode == 0, err[-3000:]
    assert len(one) == 2 and len(one[0]) == 3 and one[0] != one[1]
    np.testing.assert_allclose(two, one, rtol=1e-5)


SIGTERM_PACK = """
import signal
import sys
import time
sys.path.insert(0, "tests")
from test_members import _run
from pathlib import Path
steps = {"num_steps": 100000, "log_every": 1, "checkpoint_every": 10**9, "evals.dev.every": 0}
_run(Path(sys.argv[1]), "pack", [{**steps, "optimizer.learning_rate": lr} for lr in (1e-3, 3e-3)])
"""


@pytest.mark.slow  # a pack stopped by SIGTERM, then resumed (about 25 s)
def test_sigterm_saves_every_vmapped_member_and_the_pack_resumes(tmp_path):
    """SIGTERM while two vmapped members train: both save at the same step, the process
    exits 0, and the same pack resumes each member from its own checkpoint."""
    process = subprocess.Popen(
        [sys.executable, "-c", SIGTERM_PACK, str(tmp_path)],
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    metrics = [tmp_path / "pack" / f"m{k}" / "metrics.jsonl" for k in range(2)]
    deadline = time.monotonic() + 180
    while not all(m.exists() and m.read_text().count("\n") >= 20 for m in metrics):
        assert time.monotonic() < deadline and process.poll() is None, "the pack did not start"
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    saved = [int(part.split()[0]) for part in stderr.split("checkpoint at step ")[1:]]
    assert len(saved) == 2 and saved[0] == saved[1], stderr
    for k in range(2):
        assert (tmp_path / "pack" / f"m{k}" / "checkpoints" / str(saved[0])).is_dir()
    steps = {"num_steps": saved[0] + 10, "evals.dev.every": 0}
    resumed = _run(
        tmp_path, "pack", [{**steps, "optimizer.learning_rate": lr} for lr in (1e-3, 3e-3)]
    )
    assert [r["train"]["steps"] for r in resumed] == [saved[0] + 10] * 2
    rows = [json.loads(line) for line in metrics[1].open()]
    assert [r["step"] for r in rows if "train/loss" in r][-1] == saved[0] + 10
