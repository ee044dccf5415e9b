"""A grid as one SLURM job array: the script, its submission, and what the scheduler says.

``python -m launch.sweep --cluster=slurm`` hands its tasks here (launch.tasks: the
processes a local grid runs). Each becomes one array task that runs the very command a
local grid runs for it (``python -m launch.pack ...``), its output in the same file, so
members, member modes and results are the local grid's. SLURM does the
queueing (``--max_running`` is the array's ``%N`` throttle), the retries and the requeues;
this module only writes the batch script and submits it with ``sbatch``
(launch.slurm_status reads ``squeue``/``sacct`` back).

**Why a batch script of our own, not submitit.** A task's whole behaviour is one short
bash file kept in ``WORKDIR/slurm/`` that a user reads, edits and submits again with
``sbatch`` alone; it needs nothing installed on the compute nodes beyond the library, and
its pack command is the local grid's. submitit pickles a Python callable per task, which
cannot be read or resubmitted by hand, and adds a dependency for what ``--array``,
``--requeue`` and ``--signal`` already do.

**Preemption and time limits.** Tasks are ``--requeue``-able and ask for SIGUSR1
``--signal_seconds`` before their time limit (``--signal=B:USR1@S``, to the batch shell).
On it, the shell sends SIGTERM to the pack, whose members save at one step and exit 0
(capsim.train.faults), then the shell requeues its own task with ``scontrol requeue``,
at most ``--max_requeues`` times. A preemption (SIGTERM from SLURM) saves the same way and
SLURM requeues the task itself. A rerun resumes every unfinished member from its
checkpoints and skips the finished ones. A task whose pack fails is never requeued.
This logic is ``launch/requeue.sh``, written once: the array script holds a copy of it,
``launch/slurm.sbatch`` sources it.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import re
import shlex
import shutil
import subprocess
import types
from collections.abc import Mapping, Sequence
from pathlib import Path

from launch.grid import update_job
from launch.slurm_status import (
    DEFAULT_POLL_SECONDS,
    GRID_DIR,
    RECORD_FILE,
    TASK_LOGS,
    SlurmError,
    finish_slurm_grid,
    read_record,
)
from launch.tasks import Task

REPO = Path(__file__).resolve().parent.parent  # array tasks run from here (python -m launch.pack)
# The requeue-on-signal logic, written once: launch/slurm.sbatch sources it, the array
# script holds a copy (so that a user resubmits it alone).
REQUEUE_SCRIPT = Path(__file__).with_name("requeue.sh")

# sbatch options the grid's script sets itself: a --slurm key may not override them.
RESERVED_OPTIONS = (
    "array",
    "requeue",
    "no-requeue",
    "signal",
    "output",
    "error",
    "open-mode",
    "chdir",
    "ntasks",
    "parsable",
    "wrap",
    "wait",
)


@dataclasses.dataclass
class Resources:
    """What each array task asks SLURM for, and how it survives its time limit."""

    partition: str | None = None
    time: str | None = None
    gpus_per_task: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    account: str | None = None
    extra: dict[str, str | None] = dataclasses.field(default_factory=dict)
    max_running: int | None = None
    signal_seconds: int = 90
    max_requeues: int = 3
    job_name: str = "capsim-grid"

    def directives(self) -> list[str]:
        """The ``#SBATCH`` options these resources set (the array's own come beside)."""
        named = {
            "job-name": self.job_name,
            "partition": self.partition,
            "time": self.time,
            "gpus-per-task": self.gpus_per_task,
            "cpus-per-task": self.cpus_per_task,
            "mem": self.mem,
            "account": self.account,
        }
        options = [f"--{key}={value}" for key, value in named.items() if value is not None]
        for key, value in self.extra.items():
            options.append(f"--{key}" if value is None else f"--{key}={value}")
        return options


def parse_slurm_options(items: Sequence[str]) -> dict[str, str | None]:
    """``--slurm KEY=VALUE`` (or a bare ``KEY`` for a switch) -> {sbatch option: value};
    underscores become dashes, as sbatch spells its options."""
    options: dict[str, str | None] = {}
    for item in items:
        key, has_value, value = item.partition("=")
        key = key.strip().lstrip("-").replace("_", "-")
        if not key:
            raise SlurmError(f"--slurm {item!r}: expected KEY=VALUE, e.g. --slurm qos=high")
        options[key] = value if has_value else None
    return options


def sbatch_path() -> str:
    path = shutil.which("sbatch")
    if path is None:
        raise SlurmError(
            "--cluster=slurm: no sbatch on the PATH. Run on the cluster's login node, or "
            "install SLURM's client (Debian: apt-get install slurm-client); nothing was "
            "submitted"
        )
    return path


def check_options(resources: Resources) -> None:
    """Every ``--slurm`` key is an option this sbatch knows (read from ``sbatch --help``)
    and none is one the grid's script sets itself."""
    sbatch = sbatch_path()
    reserved = sorted(set(resources.extra) & set(RESERVED_OPTIONS))
    if reserved:
        raise SlurmError(
            f"--slurm {', '.join(reserved)}: set by the grid's script itself (one array task a "
            "pack, requeue on a signal before the time limit, output under WORKDIR/slurm); "
            "use --max_running, --signal_seconds or --max_requeues instead"
        )
    help_text = subprocess.run([sbatch, "--help"], capture_output=True, text=True).stdout
    known = set(re.findall(r"--([A-Za-z][\w-]*)", help_text))
    unknown = sorted(key for key in resources.extra if key not in known)
    if unknown:
        raise SlurmError(
            f"--slurm {', '.join(unknown)}: not an option of {sbatch} (see sbatch --help); "
            "nothing was submitted"
        )
    if resources.max_running is not None and resources.max_running < 1:
        raise SlurmError(f"--max_running must be >= 1, got {resources.max_running}")
    if resources.signal_seconds < 1 or resources.max_requeues < 0:
        raise SlurmError("--signal_seconds must be >= 1 and --max_requeues >= 0")


def script_text(tasks: Sequence[Task], resources: Resources, repo: Path, logs: Path) -> str:
    """The batch script: one array task a pack, requeued on a signal before its time limit."""
    throttle = f"%{resources.max_running}" if resources.max_running else ""
    directives = [
        f"--array=0-{len(tasks) - 1}{throttle}",
        "--ntasks=1",
        "--requeue",
        f"--signal=B:USR1@{resources.signal_seconds}",
        "--open-mode=append",
        f"--output={logs}/%A_%a.out",
        f"--chdir={repo}",
        *resources.directives(),
    ]
    cases = []
    for index, task in enumerate(tasks):
        dirs = " ".join(shlex.quote(str(d)) for d in task.job_dirs)
        command = " ".join(shlex.quote(part) for part in task.command)
        cases.append(
            f"  {index})\n    JOB_DIRS=({dirs})\n    COMMAND=({command})\n"
            f"    LOG={shlex.quote(str(task.log))}\n    ;;"
        )
    return "\n".join(
        [
            "#!/bin/bash",
            "# A capsim grid as one SLURM job array, written by python -m launch.sweep",
            "# --cluster=slurm: array task i trains pack i (the command a local grid runs, its",
            "# output where a local grid puts it: WORKDIR/packs/FIRST_JOB.log, or a job's log.txt).",
            "# Submit it again by hand with: sbatch THIS_FILE (launch.sweep sends only the",
            "# unfinished jobs, after checking that no grid of this workdir is in the queue).",
            *(f"#SBATCH {directive}" for directive in directives),
            "set -uo pipefail",
            f"MAX_REQUEUES={resources.max_requeues}",
            'case "${SLURM_ARRAY_TASK_ID:?run this script with sbatch}" in',
            *cases,
            '  *) echo "no task $SLURM_ARRAY_TASK_ID in this array" >&2; exit 2 ;;',
            "esac",
            f"# ---- {REQUEUE_SCRIPT.relative_to(REPO)}, as launch.sweep copied it ----",
            REQUEUE_SCRIPT.read_text().rstrip("\n"),
            f"# ---- end of {REQUEUE_SCRIPT.relative_to(REPO)} ----",
            'echo "== array task ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} (job $SLURM_JOB_ID),'
            ' start $starts, on $(hostname) at $(date -u +%FT%TZ)"',
            'run_requeued "${COMMAND[@]}"',
            "",
        ]
    )


def submit(
    workdir: Path, tasks: Sequence[Task], resources: Resources, repo: Path, grid: Mapping
) -> str:
    """Writes the next ``WORKDIR/slurm/submit-N.sbatch``, submits it, records the
    submission in ``grid.json``; returns the array's job id.

    Raises:
        SlurmError: sbatch refused the script (its message quoted); nothing was submitted.
    """
    workdir = Path(workdir).resolve()
    grid_dir = workdir / GRID_DIR
    logs = grid_dir / TASK_LOGS
    logs.mkdir(parents=True, exist_ok=True)
    record = read_record(workdir)
    script = grid_dir / f"submit-{len(record['submissions']) + 1}.sbatch"
    script.write_text(script_text(tasks, resources, Path(repo).resolve(), logs))
    script.chmod(0o755)
    done = subprocess.run(
        [sbatch_path(), "--parsable", str(script)], capture_output=True, text=True
    )
    if done.returncode:
        raise SlurmError(f"sbatch refused {script}: {done.stderr.strip()}; nothing was submitted")
    array_id = done.stdout.strip().split(";")[0]
    record.update(grid)
    record["submissions"].append(
        {
            "array_job_id": array_id,
            "script": str(script.relative_to(workdir)),
            "tasks": [[d.name for d in task.job_dirs] for task in tasks],
            "submitted": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
    )
    (grid_dir / RECORD_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return array_id


def send_grid(
    workdir: Path,
    tasks: Sequence[Task],
    resources: Resources,
    grid_facts: Mapping[str, str],
    module: types.ModuleType,
    arg: str,
    wait: bool,
    poll_seconds: float,
) -> int:
    """Submits the tasks (launch.tasks: their folders under the workdir's full path) as one
    job array (nothing when every job is done); with ``wait``, follows it and ends the grid
    as a local run does (``module`` and ``arg``: the grid config as it runs). Returns the
    number of failed jobs (0 when not waiting)."""
    if tasks:
        for task in tasks:
            task.prepare()
        array_id = submit(workdir, tasks, resources, REPO, grid_facts)
        for task_index, task in enumerate(tasks):
            for job_dir in task.job_dirs:
                update_job(job_dir, slurm={"array_job_id": array_id, "task": task_index})
        throttle = f", at most {resources.max_running} at once" if resources.max_running else ""
        print(
            f"submitted job array {array_id}: {len(tasks)} tasks{throttle} "
            f"(script {workdir / GRID_DIR}, their output in "
            f"{workdir / GRID_DIR / TASK_LOGS})",
            flush=True,
        )
        if not wait:
            print(f"follow it: python -m launch.sweep --status --workdir={workdir} [--wait]")
            return 0
    return finish_slurm_grid(workdir, module, arg, poll_seconds if wait else None)


def add_slurm_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of ``launch.sweep --cluster=slurm`` and ``--status``."""
    group = parser.add_argument_group(
        "SLURM (--cluster=slurm)", "what each array task asks for; see launch/slurm.py"
    )
    group.add_argument("--partition", default=None)
    group.add_argument("--time", default=None, help="each task's time limit, e.g. 4:00:00")
    group.add_argument("--gpus_per_task", type=int, default=None)
    group.add_argument("--cpus_per_task", type=int, default=None)
    group.add_argument("--mem", default=None, help="e.g. 32G")
    group.add_argument("--account", default=None)
    group.add_argument(
        "--slurm",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other sbatch option, e.g. --slurm qos=high --slurm constraint=a100 (repeat)",
    )
    group.add_argument(
        "--max_running", type=int, default=None, help="tasks running at once (the array's %%N)"
    )
    group.add_argument(
        "--signal_seconds",
        type=int,
        default=Resources.signal_seconds,
        help="SIGUSR1 this long before a task's time limit: its members save, it requeues",
    )
    group.add_argument(
        "--max_requeues",
        type=int,
        default=Resources.max_requeues,
        help="a task requeues itself at its time limit at most this many times",
    )
    group.add_argument(
        "--wait", action="store_true", help="follow the grid to its end, then write the table"
    )
    group.add_argument(
        "--status",
        action="store_true",
        help="show each job of the grid in --workdir (done, running, pending, requeued, "
        "failed); writes the table once every job has ended",
    )
    group.add_argument(
        "--poll_seconds",
        type=float,
        default=DEFAULT_POLL_SECONDS,
        help="how often --wait asks the scheduler",
    )


def resources_from_flags(args: argparse.Namespace) -> Resources:
    """The ``Resources`` that ``add_slurm_flags``' flags ask for.

    Raises:
        SlurmError: a ``--slurm`` item that is not KEY=VALUE.
    """
    return Resources(
        partition=args.partition,
        time=args.time,
        gpus_per_task=args.gpus_per_task,
        cpus_per_task=args.cpus_per_task,
        mem=args.mem,
        account=args.account,
        extra=parse_slurm_options(args.slurm),
        max_running=args.max_running,
        signal_seconds=args.signal_seconds,
        max_requeues=args.max_requeues,
    )
