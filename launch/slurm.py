"""A grid as one SLURM job array: the script, its submission, and what the scheduler says.

``python -m launch.sweep --cluster=slurm`` hands its packs here. Each pack becomes one
array task that runs the very command a local grid runs for it (``python -m launch.pack
...``), so members, member modes and results are the local grid's. SLURM does the
queueing (``--max_running`` is the array's ``%N`` throttle), the retries and the requeues;
this module only writes the batch script, submits it with ``sbatch``, and reads
``squeue``/``sacct`` back.

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
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from capsim.tables import format_table
from capsim.workdir import RESULTS_FILE
from launch.aggregate import JOB_FILE, LOG_FILE

GRID_DIR = "slurm"  # WORKDIR/slurm: the scripts, the grid's record, the tasks' output
RECORD_FILE = "grid.json"
TASK_LOGS = "logs"
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
SQUEUE_FIELDS = "ArrayTaskID:|,State:|,Reason:|,RestartCnt:|"
# squeue states (it lists ended tasks too, for MinJobAge, with -t all): a task that holds
# or is about to hold a node; a task that has ended for good. Any other state (PENDING,
# REQUEUED while a requeued task completes, REQUEUE_HOLD, SUSPENDED, ...) is still queued.
RUNNING_STATES = ("RUNNING", "COMPLETING", "CONFIGURING", "SIGNALING", "STAGE_OUT")
ENDED_STATES = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "SPECIAL_EXIT",
)
NO_ANSWER = "the scheduler did not answer"
UNANSWERED_POLLS = 10  # --wait gives up on a scheduler silent this many polls in a row


class SlurmError(RuntimeError):
    """A grid that cannot be sent as it is: nothing was submitted."""


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


def read_record(workdir: Path) -> dict:
    """The grid's record (WORKDIR/slurm/grid.json): its config and every submission."""
    path = Path(workdir) / GRID_DIR / RECORD_FILE
    return json.loads(path.read_text()) if path.exists() else {"submissions": []}


def _squeue(array_id: str) -> list[dict[str, str]] | None:
    """The array's tasks squeue knows (queued, and ended ones for MinJobAge), one dict
    each; None where squeue does not answer."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return None
    done = subprocess.run(
        [squeue, "-h", "-r", "-t", "all", "-j", array_id, "-O", SQUEUE_FIELDS],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        # A job id the controller has forgotten (MinJobAge passed) is not in the queue.
        return [] if "Invalid job id" in done.stderr else None
    tasks = []
    for line in done.stdout.splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) >= 4:
            tasks.append(dict(zip(("task", "state", "reason", "restarts"), fields, strict=False)))
    return tasks


def _sacct(array_id: str) -> dict[str, dict[str, str]]:
    """Each array task's final state and exit code, where accounting is kept; else {}."""
    sacct = shutil.which("sacct")
    if sacct is None:
        return {}
    done = subprocess.run(
        [sacct, "-n", "-P", "-X", "-j", array_id, "-o", "JobID,State,ExitCode"],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        return {}
    states = {}
    for line in done.stdout.splitlines():
        job_id, _, rest = line.partition("|")
        state, _, exit_code = rest.partition("|")
        if "_" in job_id:
            states[job_id.split("_", 1)[1]] = {"state": state.split()[0], "exit": exit_code}
    return states


def live_arrays(workdir: Path) -> dict[str, list[dict[str, str]]]:
    """The workdir's submitted arrays that still have tasks in the queue.

    Raises:
        SlurmError: squeue does not answer, so whether the grid runs cannot be told.
    """
    live = {}
    for submission in read_record(workdir)["submissions"]:
        tasks = _squeue(submission["array_job_id"])
        if tasks is None:
            raise SlurmError(f"squeue does not answer: cannot tell whether {workdir}'s grid runs")
        tasks = [task for task in tasks if task["state"] not in ENDED_STATES]
        if tasks:
            live[submission["array_job_id"]] = tasks
    return live


def check_not_owned(workdir: Path) -> None:
    """A workdir belongs to one live grid at a time."""
    if not (Path(workdir) / GRID_DIR / RECORD_FILE).exists():
        return
    live = live_arrays(workdir)
    if live:
        ids = ", ".join(live)
        raise SlurmError(
            f"{workdir} belongs to a grid still in the queue (job array {ids}): follow it with "
            f"python -m launch.sweep --status --wait --workdir={workdir}, or scancel {ids} "
            "first; nothing was submitted"
        )


@dataclasses.dataclass(frozen=True)
class Task:
    """One array task: the command a local grid would run for one pack (or one job), its
    jobs, and the file its output goes to, as locally."""

    command: list[str]
    job_dirs: list[Path]
    log: Path


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
            "starts=$(( ${SLURM_RESTART_COUNT:-0} + 1 ))",
            'echo "== array task ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} (job $SLURM_JOB_ID),'
            ' start $starts, on $(hostname) at $(date -u +%FT%TZ)"',
            "time_limit_near=0",
            'child=""',
            # SIGUSR1 (asked for before the time limit) and SIGTERM (a preemption, a requeue,
            # scancel) both reach the pack as SIGTERM: its members save at one step, exit 0.
            'trap \'time_limit_near=1; echo "== time limit near: the members save";'
            ' [[ -n $child ]] && kill -TERM "$child"\' USR1',
            'trap \'echo "== SIGTERM: the members save";'
            ' [[ -n $child ]] && kill -TERM "$child"\' TERM',
            'echo "== output: $LOG"',
            'mkdir -p "$(dirname "$LOG")"',
            '"${COMMAND[@]}" >> "$LOG" 2>&1 &',
            "child=$!",
            'while kill -0 "$child" 2> /dev/null; do wait "$child"; done',
            'wait "$child"',
            "status=$?",
            "unfinished=0",
            'for dir in "${JOB_DIRS[@]}"; do',
            '  [[ -f "$dir/results.json" ]] || unfinished=$((unfinished + 1))',
            "done",
            'echo "== exit $status; $unfinished of ${#JOB_DIRS[@]} jobs unfinished"',
            "if (( time_limit_near && status == 0 && unfinished > 0 )); then",
            "  if (( starts <= MAX_REQUEUES )); then",
            '    echo "== requeued to resume (start $((starts + 1)) of at most'
            ' $((MAX_REQUEUES + 1)))"',
            '    scontrol requeue "$SLURM_JOB_ID"',
            "  else",
            '    echo "== not requeued: started $starts times (--max_requeues $MAX_REQUEUES)"',
            "    exit 1",
            "  fi",
            "fi",
            'exit "$status"',
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


def _last_line(path: Path) -> str:
    if not path.exists():
        return ""
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def job_states(workdir: Path) -> list[dict[str, str]]:
    """Each job of the grid: done, failed, running, requeued, pending or not run, with its
    array task, restarts and (failed) its log's last line. Reads the job folders, then
    ``squeue`` for what is queued and ``sacct`` for what ended, where they answer."""
    workdir = Path(workdir)
    queues: dict[str, list[dict[str, str]] | None] = {}
    ended: dict[str, dict[str, dict[str, str]]] = {}
    rows = []
    for job_file in sorted(workdir.glob(f"*/{JOB_FILE}")):
        job_dir = job_file.parent
        record = json.loads(job_file.read_text())
        slurm = record.get("slurm") or {}
        array_id, task = slurm.get("array_job_id"), str(slurm.get("task", ""))
        row = {"job": job_dir.name, "state": "", "array task": "", "restarts": "", "detail": ""}
        if array_id:
            row["array task"] = f"{array_id}_{task}"
        if array_id and array_id not in queues:
            queues[array_id] = _squeue(array_id)
        listed = next((t for t in queues.get(array_id) or [] if t["task"] == task), None)
        if listed:
            row["restarts"] = listed["restarts"]
        queued = listed if listed and listed["state"] not in ENDED_STATES else None
        if (job_dir / RESULTS_FILE).exists():
            row["state"] = "done"
        elif record.get("returncode") not in (None, 0) or "slurm_state" in record:
            row["state"] = "failed"
        elif queued is not None:
            if queued["state"] in RUNNING_STATES:
                row["state"] = "running"
            elif queued["restarts"] not in ("", "0") or "REQUEUE" in queued["state"]:
                row["state"] = "requeued"
            else:
                row["state"] = "pending"
            row["detail"] = queued["reason"] if queued["reason"] != "None" else ""
        elif not array_id:
            row["state"] = "not run"
        elif queues.get(array_id) is None:
            row["state"], row["detail"] = "unknown", NO_ANSWER
        else:
            row["state"] = "failed"  # the task ended and the job has no results
            if listed is None and array_id not in ended:
                ended[array_id] = _sacct(array_id)
            final = ended.get(array_id, {}).get(task)
            if listed:
                row["detail"] = f"{listed['state']}; "
            elif final:
                row["detail"] = f"{final['state']} (exit {final['exit']}); "
        if row["state"] == "failed":
            row["detail"] += _last_line(job_dir / LOG_FILE)
        rows.append(row)
    return rows


def print_states(rows: Sequence[Mapping[str, str]]) -> None:
    counts = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    print(format_table(rows, ["job", "state", "array task", "restarts", "detail"]))
    print(", ".join(f"{n} {state}" for state, n in counts.items()) or "no jobs", flush=True)


def mark_ended(workdir: Path, rows: Sequence[Mapping[str, str]]) -> None:
    """Jobs whose array task ended without their results are recorded as failed in their
    job.json (with the scheduler's word), so the table says failed, not unfinished."""
    for row in rows:
        if row["state"] != "failed":
            continue
        job_file = Path(workdir) / row["job"] / JOB_FILE
        record = json.loads(job_file.read_text())
        if record.get("returncode") in (None, 0):
            record["slurm_state"] = row["detail"] or "ended without results"
            job_file.write_text(json.dumps(record, indent=2) + "\n")


def follow(workdir: Path, poll_seconds: float) -> list[dict[str, str]]:
    """Waits until no task of the workdir's arrays is queued or running, printing the
    jobs' states as they change; returns the final states."""
    previous, unanswered = None, 0
    while True:
        rows = job_states(workdir)
        summary = sorted((row["state"], row["job"]) for row in rows)
        if summary != previous:
            stamp = time.strftime("%H:%M:%S")
            counts: dict[str, int] = {}
            for row in rows:
                counts[row["state"]] = counts.get(row["state"], 0) + 1
            print(f"[{stamp}] " + ", ".join(f"{n} {s}" for s, n in counts.items()), flush=True)
            previous = summary
        if not any(row["state"] in ("running", "requeued", "pending") for row in rows):
            unanswered = unanswered + 1 if any(row["state"] == "unknown" for row in rows) else 0
            if 0 < unanswered <= UNANSWERED_POLLS:
                time.sleep(poll_seconds)  # the controller may be restarting: ask again
                continue
            return rows
        time.sleep(poll_seconds)
