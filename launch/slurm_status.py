"""What a grid on SLURM is doing: each job's state from its folder, ``squeue`` and
``sacct``; following the grid to its end; the grid's end (launch.finish) once every job
has ended.

``python -m launch.sweep --status [--wait] --workdir=DIR`` runs ``grid_status``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import types
from collections.abc import Mapping, Sequence
from pathlib import Path

from capsim.tables import format_table
from capsim.workdir import RESULTS_FILE
from launch.finish import finish_grid
from launch.grid import JOB_FILE, LOG_FILE, load_config_module, read_job, update_job

GRID_DIR = "slurm"  # WORKDIR/slurm: the scripts, the grid's record, the tasks' output
RECORD_FILE = "grid.json"
TASK_LOGS = "logs"
DEFAULT_POLL_SECONDS = 30.0  # how often --wait asks the scheduler
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
        record = read_job(job_dir)
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
        job_dir = Path(workdir) / row["job"]
        if read_job(job_dir).get("returncode") in (None, 0):
            update_job(job_dir, slurm_state=row["detail"] or "ended without results")


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


def finish_slurm_grid(
    workdir: Path, module: types.ModuleType, arg: str, poll_seconds: float | None
) -> int:
    """Shows each job's state (following the grid to its end when ``poll_seconds`` is
    given); once no task is queued, records the ended jobs and ends the grid as a local
    run does (launch.finish: ``module`` and ``arg``, the grid config as it ran).
    Returns the number of failed jobs."""
    rows = job_states(workdir) if poll_seconds is None else follow(workdir, poll_seconds)
    print_states(rows)
    if any(row["state"] in ("running", "requeued", "pending", "unknown") for row in rows):
        return 0
    mark_ended(workdir, rows)
    finish_grid(workdir, module, arg)
    return sum(row["state"] == "failed" for row in rows)


def grid_status(workdir: str | Path, wait: bool, poll_seconds: float) -> int:
    """``--status``: the jobs of the grid in ``workdir``; the table once all have ended."""
    workdir = Path(workdir)
    record = read_record(workdir)
    if "config" not in record:
        if not any(workdir.glob(f"*/{JOB_FILE}")):
            raise FileNotFoundError(f"{workdir} holds no grid (no job folders)")
        print_states(job_states(workdir))  # a local grid: its folders
        return 0
    config_file, _, arg = record["config"].partition(":")
    module = load_config_module(Path(record["cwd"]) / config_file)
    return finish_slurm_grid(workdir, module, arg, poll_seconds if wait else None)
