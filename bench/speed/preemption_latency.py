"""How long a 2-process run takes from SIGTERM to its agreed checkpoint, idle and under load.

Each try starts the VTFN demo (configs/demo_bow.py, shapes world) as two
jax.distributed processes on localhost (gloo), exactly as a user starts a
multi-host run, with no checkpoint but the preemption one. Once step
``--signal_at`` is logged, one process (alternating) gets SIGTERM; the script
then stamps the lines the processes print: the step they agreed on (``stopping
at step N``) and ``saved a checkpoint``. Reported per condition, as median and
max over the tries: the steps between the last logged step at the signal and
the agreed one, the seconds to the agreement, to the saved checkpoint and to
both processes' exit. "heavy" runs a busy NumPy matmul process beside the run.

    python bench/speed/preemption_latency.py [--tries 10] [--conditions idle,heavy]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# configs/ is used from the clone, not installed: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from bench.harness import REPO, RESULTS_DIR, load_average, machine_facts, update_section
from capsim.tables import format_table

AGREED = re.compile(r"stopping at step (\d+), the step every process agreed on")
SAVED = re.compile(r"saved a checkpoint at step (\d+)")
HEAVY = "import numpy as np\na = np.ones((1500, 1500))\nwhile True:\n    a @ a\n"
TITLE = "## Preemption: SIGTERM to the agreed checkpoint"
WHAT_SETS_IT = (
    "What sets the agreement: XLA's SIGTERM notifier (under jax.distributed's preemption "
    "service) polls its flag once a second, a constant with no setting in jax 0.10, so the "
    "notice waits 0-1 s; then one key-value write and one barrier of the coordination "
    "service fix the step (the fastest process's step + 1). The steps to agreement are that "
    "time over the step time, which is why a loaded machine (slower steps) agrees in fewer "
    "steps. Saving the checkpoint adds about 0.5 s; the exit after it is jax.distributed's "
    "shutdown. A cloud preemption notice leaves about 30 s."
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _last_step(metrics: Path) -> int:
    try:
        lines = metrics.read_text().split("\n")[:-1]
    except FileNotFoundError:
        return 0
    return max((json.loads(line)["step"] for line in lines), default=0)


def _start(workdir: Path, config_arg: str) -> tuple[list[subprocess.Popen], list[Path]]:
    port, procs, logs = _free_port(), [], []
    command = [
        sys.executable,
        "-m",
        "vtfn_jax.train",
        f"--config=configs/demo_bow.py:{config_arg}",
        f"--workdir={workdir}",
        "--config.num_steps=1000000",  # never reached: the run ends at the preemption
        "--config.checkpoint_every=0",
        "--config.log_every=1",
        "--config.evals.dev.every=0",  # no evaluation pauses: steps at their own pace
    ]
    for rank in range(2):
        env = dict(
            os.environ,
            JAX_PLATFORMS="cpu",
            JAX_CPU_COLLECTIVES_IMPLEMENTATION="gloo",
            JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
            JAX_NUM_PROCESSES="2",
            JAX_PROCESS_ID=str(rank),
        )
        logs.append(workdir.parent / f"{workdir.name}.stderr.{rank}")
        with logs[-1].open("w") as err:
            procs.append(
                subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err)
            )
    return procs, logs


def one_try(root: Path, index: int, config_arg: str, signal_at: int) -> dict:
    """One preempted run; the seconds and steps from the signal to the agreement, save, exit."""
    workdir = root / f"try{index}"
    procs, logs = _start(workdir, config_arg)
    try:
        deadline = time.monotonic() + 600
        while _last_step(workdir / "metrics.jsonl") < signal_at:
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                raise RuntimeError(f"try {index} stopped early: {logs[0].read_text()[-2000:]}")
            time.sleep(0.002)
        signalled = index % 2
        signal_step = _last_step(workdir / "metrics.jsonl")
        sent = time.monotonic()
        procs[signalled].send_signal(signal.SIGTERM)
        stamps: dict[str, float] = {}
        agreed = None
        while any(p.poll() is None for p in procs) or len(stamps) < 2:
            now = time.monotonic() - sent
            texts = [log.read_text() for log in logs]
            if "agreed" not in stamps and any(AGREED.search(t) for t in texts):
                stamps["agreed"] = now
                agreed = int(next(AGREED.search(t) for t in texts if AGREED.search(t)).group(1))
            if "saved" not in stamps and all(SAVED.search(t) for t in texts):
                stamps["saved"] = now
            if now > 120:
                raise RuntimeError(f"try {index}: no agreed save 120 s after SIGTERM")
            if all(p.poll() is not None for p in procs) and len(stamps) < 2:
                raise RuntimeError(f"try {index} exited without saving: {texts[0][-2000:]}")
            time.sleep(0.005)
        exited = time.monotonic() - sent
        codes = [p.returncode for p in procs]
        if codes != [0, 0]:
            raise RuntimeError(f"try {index}: exit codes {codes}")
        rows = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
        speeds = [
            row["train/examples_per_second"] for row in rows if "train/examples_per_second" in row
        ]
        batch = json.loads((workdir / "config.json").read_text())["batch_size"]
        return {
            "signalled_process": signalled,
            "signal_step": signal_step,
            "agreed_step": agreed,
            "steps_after_signal": agreed - signal_step,
            "step_ms": 1000 * batch / float(np.median(speeds[-20:])),
            "agreed_s": stamps["agreed"],
            "saved_s": stamps["saved"],
            "exited_s": exited,
        }
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def run_condition(name: str, tries: int, config_arg: str, signal_at: int) -> dict:
    heavy = None
    if name == "heavy":
        heavy = subprocess.Popen([sys.executable, "-c", HEAVY])
        time.sleep(2)
    load_before = load_average()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = []
            for index in range(tries):
                results.append(one_try(Path(tmp), index, config_arg, signal_at))
                print(f"{name} try {index + 1}/{tries}: {results[-1]}", flush=True)
    finally:
        if heavy is not None:
            heavy.kill()
            heavy.wait()
    return {"tries": results, "load_before": load_before, "load_after": load_average()}


def summary_rows(conditions: dict[str, dict]) -> list[dict]:
    rows = []
    for name, measured in conditions.items():
        tries = measured["tries"]
        row = {"condition": name, "tries": len(tries)}
        for key, label in (
            ("steps_after_signal", "steps to agreement"),
            ("step_ms", "step ms"),
            ("agreed_s", "s to agreement"),
            ("saved_s", "s to saved checkpoint"),
            ("exited_s", "s to both exited"),
        ):
            values = [t[key] for t in tries]
            row[label] = f"{np.median(values):.2f} / {max(values):.2f}"
        row["load before / after"] = f"{measured['load_before']:.2f} / {measured['load_after']:.2f}"
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=10)
    parser.add_argument("--conditions", default="idle,heavy")
    parser.add_argument("--signal_at", type=int, default=30, help="logged step of the SIGTERM")
    parser.add_argument("--config_arg", default="runlocal")
    parser.add_argument("--no_write", action="store_true", help="print only (tests)")
    args = parser.parse_args()
    conditions = {
        name: run_condition(name, args.tries, args.config_arg, args.signal_at)
        for name in args.conditions.split(",")
    }
    rows = summary_rows(conditions)
    columns = list(rows[0])
    table = format_table(rows, columns)
    print(table)
    if args.no_write:
        return
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / "preemption_latency.json"
    out.write_text(json.dumps({"machine": machine_facts(), **conditions}, indent=2) + "\n")
    command = "python bench/speed/preemption_latency.py " + " ".join(sys.argv[1:])
    update_section(
        TITLE,
        f"{TITLE}\n\n`{command.strip()}` (per-try rows: `bench/results/{out.name}`). "
        "Each cell is median / max over the tries.\n\n" + table + "\n\n" + WHAT_SETS_IT + "\n",
    )


if __name__ == "__main__":
    main()
