"""A grid as a list of tasks: the processes both paths run.

A task is one process of a grid: its command (``python -m launch.pack ...`` for a pack,
the trainer's own command for a job alone), its jobs' folders and the file its output
goes to. ``make_tasks`` builds them once; ``launch.sweep --cluster=local`` runs them
here as processes (``run_tasks``), ``--cluster=slurm`` writes them into one job array's
script (launch.slurm). Where a task's output goes is decided here only (``Task.log``):
a pack's own lines to ``WORKDIR/packs/<first job>.log`` (each member logs to its own
``log.txt``), a job alone to its ``log.txt``.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from capsim.workdir import RESULTS_FILE
from launch.grid import LOG_FILE, PACK_LOGS, Job, prepare_job, read_job, shape_of, update_job

MEM_FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"
# Of one accelerator's memory, the share all jobs of a --jobs N grid take together.
GPU_MEMORY_SHARE = 0.9


@dataclasses.dataclass(frozen=True)
class Packing:
    """How a grid's jobs share processes: up to ``size`` a process (1: a process a job),
    their members ``member_mode``; ``fit_memory``: every member of a shape in one process,
    split into programs that fit the device (``--pack auto``)."""

    size: int = 1
    member_mode: str = "auto"
    fit_memory: bool = False

    @property
    def packed(self) -> bool:
        return self.size > 1

    def describe(self, processes: int) -> str:
        """The line a grid prints about its packs."""
        size = "as many as fit in memory (auto)" if self.fit_memory else f"up to {self.size}"
        mode = f"member mode: {self.member_mode}"
        if self.member_mode == "auto":
            mode += "; each pack's log names the mode taken"
        return f"{processes} processes of {size} members each ({mode})"


@dataclasses.dataclass(frozen=True)
class Task:
    """One process of a grid: the command that trains ``jobs`` (one pack, or one job alone
    when not ``packed``), their folders under ``workdir`` and its log."""

    jobs: tuple[Job, ...]
    command: list[str]
    workdir: Path
    packed: bool = False

    @property
    def names(self) -> list[str]:
        return [job.name for job in self.jobs]

    @property
    def job_dirs(self) -> list[Path]:
        return [self.workdir / job.name for job in self.jobs]

    @property
    def log(self) -> Path:
        """Where the process's output goes, on either path."""
        first = self.jobs[0].name
        return (
            self.workdir / PACK_LOGS / f"{first}.log"
            if self.packed
            else self.workdir / first / LOG_FILE
        )

    def prepare(self) -> None:
        """Each job's folder, overrides and fresh record (a pack's members name the pack)."""
        fields = {"pack": self.names} if self.packed else {}
        for job in self.jobs:
            prepare_job(job, self.workdir, self.command, **fields)

    def run(self, env: Mapping | None = None) -> list[bool]:
        """Runs the process here to its end; whether each job finished."""
        self.prepare()
        header = " ".join(self.command) + "\n\n"
        if not self.packed:
            return [self._run_alone(header, env)]
        for job_dir in self.job_dirs:  # a member's own lines follow in its log.txt
            (job_dir / LOG_FILE).write_text(header)
        self.log.parent.mkdir(exist_ok=True)
        with open(self.log, "w") as log:
            returncode = subprocess.run(
                self.command, stdout=log, stderr=subprocess.STDOUT, env=env
            ).returncode
        ok = [(job_dir / RESULTS_FILE).exists() for job_dir in self.job_dirs]
        if returncode not in (0, 1):  # the process itself died: its unfinished members failed
            for job_dir, finished in zip(self.job_dirs, ok, strict=True):
                if not finished and "returncode" not in read_job(job_dir):
                    update_job(job_dir, returncode=returncode)
        return ok

    def _run_alone(self, header: str, env: Mapping | None) -> bool:
        start = time.monotonic()
        with open(self.log, "w") as log:
            log.write(header)
            log.flush()
            returncode = subprocess.run(
                self.command, stdout=log, stderr=subprocess.STDOUT, env=env
            ).returncode
        seconds = round(time.monotonic() - start, 1)
        update_job(self.job_dirs[0], returncode=returncode, seconds=seconds)
        return returncode == 0


def packs(jobs: Sequence[Job], size: int) -> list[list[Job]]:
    """Jobs that differ only in member keys (launch.grid.MEMBER_KEYS), up to ``size`` a
    pack; jobs that differ in a shape key go to separate packs."""
    groups: dict[str, list[Job]] = {}
    for job in jobs:
        groups.setdefault(shape_of(job.overrides), []).append(job)
    return [group[k : k + size] for group in groups.values() for k in range(0, len(group), size)]


def pack_command(
    jobs: Sequence[Job], train_module: str, config: str, workdir: Path, packing: Packing
) -> list[str]:
    """The command that trains ``jobs`` as one pack (launch.pack)."""
    command = [sys.executable, "-m", "launch.pack", f"--train_module={train_module}"]
    command += [f"--config={config}", f"--member_mode={packing.member_mode}"]
    if packing.fit_memory:
        command.append("--fit_memory")
    return command + [str(workdir / job.name) for job in jobs]


def make_tasks(
    jobs: Sequence[Job], packing: Packing, train_module: str, config: str, workdir: Path
) -> list[Task]:
    """The grid's processes: packs of ``jobs`` when ``packing`` packs, else a job each."""
    if not packing.packed:
        return [Task((job,), job.command(train_module, config, workdir), workdir) for job in jobs]
    return [
        Task(tuple(pack), pack_command(pack, train_module, config, workdir, packing), workdir, True)
        for pack in packs(jobs, packing.size)
    ]


def job_environment(jobs: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a job run beside ``jobs - 1`` others: each JAX process takes
    ``GPU_MEMORY_SHARE / jobs`` of an accelerator's memory instead of the 75% it
    preallocates by default, so that jobs sharing one GPU all start. A user's own
    ``XLA_PYTHON_CLIENT_MEM_FRACTION`` or ``XLA_PYTHON_CLIENT_PREALLOCATE`` is kept."""
    env = dict(environ)
    if jobs > 1 and not {MEM_FRACTION, "XLA_PYTHON_CLIENT_PREALLOCATE"} & set(env):
        env[MEM_FRACTION] = f"{GPU_MEMORY_SHARE / jobs:.3f}"
    return env


def _format_seconds(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def run_tasks(tasks: Sequence[Task], processes: int, done: int, grid_size: int) -> list[Job]:
    """Runs the tasks here, ``processes`` at once, printing each job's end with the grid's
    progress (``done`` of ``grid_size`` jobs finished before); returns the failed jobs."""
    failed: list[Job] = []
    pending = sum(len(task.jobs) for task in tasks)
    finished, start = 0, time.monotonic()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=processes)
    try:
        env = job_environment(processes, os.environ)
        futures = {pool.submit(task.run, env): task for task in tasks}
        for future in concurrent.futures.as_completed(futures):
            for job, ok in zip(futures[future].jobs, future.result(), strict=True):
                finished += 1
                done += ok
                if not ok:
                    failed.append(job)
                elapsed = time.monotonic() - start
                eta = elapsed / finished * (pending - finished)
                print(
                    f"[{finished}/{pending}] {job.name}: {'ok' if ok else 'FAILED'}; "
                    f"grid {done}/{grid_size} done, {_format_seconds(elapsed)} elapsed, "
                    f"ETA {_format_seconds(eta)}",
                    flush=True,
                )
    finally:  # on Ctrl-C, start no queued job
        pool.shutdown(wait=True, cancel_futures=True)
    return failed
