"""A real one-node SLURM cluster on this machine: Debian's ``slurmctld``, ``slurmd`` and
``munge``, started as root on loopback under one folder, for the tests (tests/test_slurm.py),
the grid bench (bench/speed/slurm_grid.py, which uses the cluster SLURM_CONF names) and
anyone who wants to try ``launch.sweep --cluster=slurm`` before meeting a real cluster.
A development tool, not part of the launchers: it installs packages with apt as root.

    python tools/local_slurm.py start --dir /tmp/slurm --install   # prints: export SLURM_CONF=...
    python tools/local_slurm.py stop --dir /tmp/slurm

The cluster is not an imitation: ``sbatch``, job arrays, ``srun``, requeues, signals and
time limits are SLURM's own. What one node leaves out is what a site adds (accounting,
several partitions, preemption between users). Everything it writes stays under the
folder: the configuration, munge's key and socket, the daemons' state, spool and logs.
Clients find it through ``SLURM_CONF``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

# Debian's packages (apt-get install): the daemons, the clients and the authentication.
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
PROGRAMS = ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "munged")
CONFIG_FILE = "slurm.conf"
PARTITION = "debug"
NODE_UP_SECONDS = 60


class SlurmUnavailable(RuntimeError):
    """SLURM cannot run here (not installed and not installable, not root, a daemon died)."""


def missing_programs() -> list[str]:
    """The SLURM and munge programs that are not on the PATH (sbin included)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [name for name in PROGRAMS if shutil.which(name, path=path) is None]


def install() -> None:
    """Installs Debian's SLURM and munge packages with apt-get when a program is missing.

    Raises:
        SlurmUnavailable: not root, no apt-get, or apt-get failed (its last lines quoted).
    """
    missing = missing_programs()
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise SlurmUnavailable(
            f"SLURM programs {missing} are missing and cannot be installed here (needs root "
            f"and apt-get: apt-get install {' '.join(PACKAGES)})"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", *PACKAGES]):
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode:
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-5:])
            raise SlurmUnavailable(f"{' '.join(command)} failed:\n{tail}")
    if missing_programs():
        raise SlurmUnavailable(f"still missing after apt-get: {missing_programs()}")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _memory_mb() -> int:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise SlurmUnavailable("no MemTotal in /proc/meminfo")


def write_config(directory: Path, cpus: int | None = None, memory_mb: int | None = None) -> Path:
    """slurm.conf for one node, this host, on free loopback ports; returns its path.

    ``proctrack/linuxproc`` and ``task/none`` need no cgroups (containers have none to
    give); ``MinJobAge`` keeps ended array tasks visible to ``squeue``/``scontrol`` for
    a while, as sites do; requeued jobs wait SLURM's usual delay before they start again.
    """
    directory = Path(directory)
    for sub in ("state", "spool", "log"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    ctld_port, slurmd_port = _free_ports(2)
    cpus = cpus or os.cpu_count() or 1
    memory_mb = memory_mb or int(_memory_mb() * 0.9)
    lines = {
        "ClusterName": "capsim",
        "SlurmctldHost": f"{host}(127.0.0.1)",
        "SlurmctldPort": ctld_port,
        "SlurmdPort": slurmd_port,
        "SlurmUser": "root",
        "SlurmdUser": "root",
        "AuthType": "auth/munge",
        "AuthInfo": f"socket={directory / 'munge.sock'}",
        "CredType": "cred/munge",
        "StateSaveLocation": directory / "state",
        "SlurmdSpoolDir": directory / "spool",
        "SlurmctldPidFile": directory / "slurmctld.pid",
        "SlurmdPidFile": directory / "slurmd.pid",
        "SlurmctldLogFile": directory / "log" / "slurmctld.log",
        "SlurmdLogFile": directory / "log" / "slurmd.log",
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/none",
        "SchedulerType": "sched/backfill",
        "SchedulerParameters": "sched_interval=2",
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_CPU_Memory",
        "ReturnToService": 2,
        "MpiDefault": "none",
        "JobAcctGatherType": "jobacct_gather/none",
        "AccountingStorageType": "accounting_storage/none",
        "JobCompType": "jobcomp/none",
        "MinJobAge": 600,
        "KillWait": 30,
        # a job that asks for no memory gets a CPU's share, not the whole node's
        "DefMemPerCPU": memory_mb // cpus,
        "NodeName": f"{host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        "PartitionName": f"{PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP",
    }
    path = directory / CONFIG_FILE
    path.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    return path


def _run(command: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, env=dict(env))


def environment(directory: str | Path) -> dict[str, str]:
    """This process's environment with ``SLURM_CONF`` pointing at the folder's cluster."""
    return dict(os.environ, SLURM_CONF=str(Path(directory) / CONFIG_FILE))


def _log_tail(directory: Path) -> str:
    tails = []
    for log in [*sorted((directory / "log").glob("*.log")), directory / "munged.log"]:
        if log.exists():
            tails.append(f"{log.name}: " + " | ".join(log.read_text().splitlines()[-3:]))
    return "\n".join(tails)


def start(directory: str | Path, cpus: int | None = None, memory_mb: int | None = None) -> Path:
    """Starts munged, slurmctld and slurmd under ``directory``; returns slurm.conf's path
    once the node answers as idle. Stop them with ``stop(directory)``.

    Raises:
        SlurmUnavailable: a program is missing, this is not root, or the node did not come
            up within a minute (the daemons' last log lines quoted).
    """
    directory = Path(directory).resolve()
    if missing_programs():
        raise SlurmUnavailable(f"SLURM programs missing: {missing_programs()} (see install())")
    if os.geteuid() != 0:
        raise SlurmUnavailable("a local SLURM runs its daemons as root; this is not root")
    directory.mkdir(parents=True, exist_ok=True)
    config = write_config(directory, cpus, memory_mb)
    key = directory / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    env = environment(directory)
    sbin = os.pathsep.join(["/usr/sbin", "/sbin", env.get("PATH", "")])
    env["PATH"] = sbin
    munged = [
        "munged",
        "--force",
        f"--socket={directory / 'munge.sock'}",
        f"--key-file={key}",
        f"--pid-file={directory / 'munged.pid'}",
        f"--log-file={directory / 'munged.log'}",
        f"--seed-file={directory / 'munged.seed'}",
    ]
    for command in (munged, ["slurmctld", "-f", str(config)], ["slurmd", "-f", str(config)]):
        done = _run(command, env)
        if done.returncode:
            stop(directory)
            raise SlurmUnavailable(
                f"{command[0]} did not start ({done.returncode}): {done.stderr.strip()}\n"
                f"{_log_tail(directory)}"
            )
    deadline = time.monotonic() + NODE_UP_SECONDS
    while time.monotonic() < deadline:
        state = _run(["sinfo", "-h", "-o", "%T"], env).stdout.strip()
        if state in ("idle", "mixed", "allocated"):
            return config
        time.sleep(0.5)
    stop(directory)
    raise SlurmUnavailable(
        f"the node did not come up in {NODE_UP_SECONDS} s (sinfo: {state!r})\n"
        f"{_log_tail(directory)}"
    )


def stop(directory: str | Path) -> None:
    """Stops the folder's daemons (its running jobs are killed with them)."""
    directory = Path(directory).resolve()
    for pid_file in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
        path = directory / pid_file
        try:
            pid = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            continue
        for _ in range(100):  # up to 10 s for a clean exit
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("start", "stop"))
    parser.add_argument("--dir", required=True, type=Path, help="the cluster's folder")
    parser.add_argument("--cpus", type=int, default=None, help="default: this machine's")
    parser.add_argument("--install", action="store_true", help="apt-get install when missing")
    args = parser.parse_args(argv)
    try:
        if args.action == "stop":
            stop(args.dir)
            print(f"stopped the SLURM daemons of {args.dir}")
            return 0
        if args.install:
            install()
        config = start(args.dir, args.cpus)
    except SlurmUnavailable as error:
        print(f"local SLURM: {error}", file=sys.stderr)
        return 1
    print(f"one-node SLURM up (partition {PARTITION}); for its clients:")
    print(f"export SLURM_CONF={config}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
