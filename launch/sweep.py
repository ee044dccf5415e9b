"""Run a config's ablation grid, on this machine or as one SLURM job array, and tabulate it.

    python -m launch.sweep --config=configs/sweep_vtfn.py:dataset=shapes_world --workdir=runs/grid [--pack 4] [--jobs 2] [--max_runs N] [--runlocal]
    python -m launch.sweep --config=... --workdir=DIR --cluster=slurm [--wait] [resources]
    python -m launch.sweep --status [--wait] --workdir=DIR

The grid config (``get_config``, ``get_sweep(hyper, arg)``, ``TRAIN_MODULE``, ``METRICS``)
expands to its jobs as launch.grid says; a wrong key stops the grid before any job runs.
Jobs that differ only in member keys (the seed, the optimizer's and the loss's numbers,
dropout) share a process, up to ``--pack`` of them (launch.pack; ``--member_mode``:
vmapped, in_turn or auto); ``--pack 1`` runs each job alone, as ``python -m TRAIN_MODULE
--config=FILE:ARG --overrides=JOB/overrides.json``. Each job logs to ``WORKDIR/<job
name>/log.txt``, a pack's own lines go to ``WORKDIR/packs/``. Locally ``--jobs N``
processes run at once, each JAX taking 0.9/N of an accelerator's memory
(``XLA_PYTHON_CLIENT_MEM_FRACTION``, unless you set it or
``XLA_PYTHON_CLIENT_PREALLOCATE``). With ``--cluster=slurm`` the same processes are
the tasks of one job array (launch.slurm). A job whose folder holds ``results.json`` is
never run again, so sending the command again resumes the grid; a failed job does not
stop the others, but makes the exit code non-zero. At the end (here, or after
``--wait`` or ``--status`` on SLURM) launch.finish writes ``WORKDIR/results.csv`` and
``WORKDIR/results.md``, and for a paper table's config ``table.md`` and ``table.json``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from capsim.workdir import RESULTS_FILE
from launch import slurm, slurm_status
from launch.finish import finish_grid
from launch.grid import (
    LOG_FILE,
    PACK_LOGS,
    Job,
    add_member_mode_flag,
    expand_grid,
    load_config_module,
    merge_arg,
    prepare_job,
    read_job,
    shape_of,
    update_job,
)

MEM_FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"
# Members a process by default: with --jobs 2, 3.15x a process a job on 2 cores
# (bench/speed/grid_packing.py; 2.90x as one process of 8).
DEFAULT_PACK = 4
AUTO_PACK = "auto"  # --pack auto: a shape's members in one process, vmapped as many as fit
# Of one accelerator's memory, the share all jobs of a --jobs N grid take together.
GPU_MEMORY_SHARE = 0.9
LOCAL, SLURM = "local", "slurm"
CLUSTERS = (LOCAL, SLURM)


def job_environment(jobs: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a job run beside ``jobs - 1`` others: each JAX process takes
    ``GPU_MEMORY_SHARE / jobs`` of an accelerator's memory instead of the 75% it
    preallocates by default, so that jobs sharing one GPU all start. A user's own
    ``XLA_PYTHON_CLIENT_MEM_FRACTION`` or ``XLA_PYTHON_CLIENT_PREALLOCATE`` is kept."""
    env = dict(environ)
    if jobs > 1 and not {MEM_FRACTION, "XLA_PYTHON_CLIENT_PREALLOCATE"} & set(env):
        env[MEM_FRACTION] = f"{GPU_MEMORY_SHARE / jobs:.3f}"
    return env


def run_job(
    task: Sequence[Job], train_module: str, config: str, workdir: Path, env: Mapping | None = None
) -> list[bool]:
    """Runs one job (``task`` holds it alone) to completion, its output in log.txt."""
    (job,) = task
    command = job.command(train_module, config, workdir)
    prepare_job(job, workdir, command)
    start = time.monotonic()
    with open(workdir / job.name / LOG_FILE, "w") as log:
        log.write(" ".join(command) + "\n\n")
        log.flush()
        returncode = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, env=env
        ).returncode
    update_job(
        workdir / job.name, returncode=returncode, seconds=round(time.monotonic() - start, 1)
    )
    return [returncode == 0]


def packs(jobs: Sequence[Job], size: int) -> list[list[Job]]:
    """Jobs that differ only in member keys (launch.grid.MEMBER_KEYS), up to ``size`` a
    pack; jobs that differ in a shape key go to separate packs."""
    groups: dict[str, list[Job]] = {}
    for job in jobs:
        groups.setdefault(shape_of(job.overrides), []).append(job)
    return [group[k : k + size] for group in groups.values() for k in range(0, len(group), size)]


def pack_command(
    task: Sequence[Job],
    train_module: str,
    config: str,
    workdir: Path,
    member_mode: str = "auto",
    fit_memory: bool = False,
) -> list[str]:
    """The command that trains ``task``'s jobs as one pack, locally or as an array task."""
    command = [sys.executable, "-m", "launch.pack", f"--train_module={train_module}"]
    command += [f"--config={config}", f"--member_mode={member_mode}"]
    if fit_memory:
        command.append("--fit_memory")
    return command + [str(workdir / job.name) for job in task]


def run_members(
    task: Sequence[Job],
    train_module: str,
    config: str,
    workdir: Path,
    env: Mapping | None = None,
    member_mode: str = "auto",
    fit_memory: bool = False,
) -> list[bool]:
    """One process trains the jobs of ``task`` as a pack (launch.pack); each member's output
    goes to its own log.txt, the process's own lines to ``packs/<first member>.log``."""
    command = pack_command(task, train_module, config, workdir, member_mode, fit_memory)
    names = [job.name for job in task]
    for job in task:
        prepare_job(job, workdir, command, pack=names)
        (workdir / job.name / LOG_FILE).write_text(" ".join(command) + "\n\n")
    (workdir / PACK_LOGS).mkdir(exist_ok=True)
    with open(workdir / PACK_LOGS / f"{task[0].name}.log", "w") as log:
        returncode = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, env=env
        ).returncode
    ok = [(workdir / job.name / RESULTS_FILE).exists() for job in task]
    if returncode not in (0, 1):  # the process itself died: its unfinished members failed
        for job, finished in zip(task, ok, strict=True):
            if not finished and "returncode" not in read_job(workdir / job.name):
                update_job(workdir / job.name, returncode=returncode)
    return ok


def _format_seconds(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


def run_sweep(
    config: str,
    workdir: str | Path,
    jobs: int = 1,
    max_runs: int | None = None,
    runlocal: bool = False,
    train_module: str | None = None,
    pack: int | str = DEFAULT_PACK,
    member_mode: str = "auto",
    cluster: str = LOCAL,
    resources: slurm.Resources | None = None,
    wait: bool = False,
    poll_seconds: float = slurm_status.DEFAULT_POLL_SECONDS,
) -> int:
    """Expands and runs the grid; returns the number of failed jobs. ``pack`` > 1 trains up
    to that many jobs a process (launch.pack, its members ``member_mode``), ``jobs``
    processes at once. ``cluster="slurm"`` sends the same packs as one SLURM job array
    instead (launch.slurm, ``resources`` each task's), and with ``wait`` follows it to
    the end and writes the table; without, it returns 0 once the array is queued."""
    fit_memory = pack == AUTO_PACK  # every member of a shape in one process, as many as fit
    pack = sys.maxsize if fit_memory else int(pack)
    if jobs < 1 or pack < 1:
        raise ValueError(f"--jobs and --pack must be >= 1 (or --pack auto), got {jobs} and {pack}")
    if cluster not in CLUSTERS:
        raise ValueError(f"--cluster {cluster!r}: expected one of {CLUSTERS}")
    config_file, _, arg = config.partition(":")
    if runlocal:
        arg = merge_arg(arg, {"runlocal": True})
    module = load_config_module(config_file)
    grid = expand_grid(module, arg)
    train_module = train_module or module.TRAIN_MODULE
    config = f"{config_file}:{arg}" if arg else config_file
    workdir = Path(workdir)
    if cluster == SLURM:  # before anything is written: a clear error, nothing submitted
        config = f"{Path(config_file).resolve()}:{arg}" if arg else str(Path(config_file).resolve())
        resources = resources or slurm.Resources()
        slurm.check_options(resources)
        slurm_status.check_not_owned(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    pending = [job for job in grid if not (workdir / job.name / RESULTS_FILE).exists()]
    done = len(grid) - len(pending)
    if max_runs is not None:
        pending = pending[:max_runs]
    verb = "sending" if cluster == SLURM else "running"
    print(f"grid of {len(grid)}: {done} already done, {verb} {len(pending)}", flush=True)
    tasks = packs(pending, pack) if pack > 1 else [[job] for job in pending]
    if pack > 1:
        size = "as many as fit in memory (auto)" if fit_memory else f"up to {pack}"
        mode = f"member mode: {member_mode}"
        if member_mode == "auto":
            mode += "; each pack's log names the mode taken"
        print(f"{len(tasks)} processes of {size} members each ({mode})", flush=True)
    if cluster == SLURM:  # the commands a local grid runs, with the workdir's full path
        root = workdir.resolve()
        commands = [
            pack_command(task, train_module, config, root, member_mode, fit_memory)
            if pack > 1
            else task[0].command(train_module, config, root)
            for task in tasks
        ]
        grid_facts = {"config": config, "cwd": os.getcwd(), "train_module": train_module}
        return slurm.send_grid(
            workdir,
            tasks,
            commands,
            pack > 1,
            resources,
            grid_facts,
            module,
            arg,
            wait,
            poll_seconds,
        )
    failed = []
    start = time.monotonic()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs)
    try:
        env = job_environment(jobs, os.environ)
        futures = {
            pool.submit(
                run_members, task, train_module, config, workdir, env, member_mode, fit_memory
            )
            if pack > 1
            else pool.submit(run_job, task, train_module, config, workdir, env): task
            for task in tasks
        }
        finished = 0
        for future in concurrent.futures.as_completed(futures):
            for job, ok in zip(futures[future], future.result(), strict=True):
                finished += 1
                done += ok
                if not ok:
                    failed.append(job)
                elapsed = time.monotonic() - start
                eta = elapsed / finished * (len(pending) - finished)
                print(
                    f"[{finished}/{len(pending)}] {job.name}: {'ok' if ok else 'FAILED'}; "
                    f"grid {done}/{len(grid)} done, {_format_seconds(elapsed)} elapsed, "
                    f"ETA {_format_seconds(eta)}",
                    flush=True,
                )
    finally:  # on Ctrl-C, start no queued job
        pool.shutdown(wait=True, cancel_futures=True)
    finish_grid(workdir, module, arg)
    for job in failed:
        print(f"FAILED {job.name}: see {workdir / job.name / LOG_FILE}", file=sys.stderr)
    return len(failed)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=None, help="sweep config file[:arg] (required)")
    parser.add_argument("--workdir", required=True, help="one folder per job goes here")
    parser.add_argument(
        "--cluster",
        choices=CLUSTERS,
        default=LOCAL,
        help="local: processes on this machine; slurm: one SLURM job array, a task a pack",
    )
    parser.add_argument("--jobs", type=int, default=1, help="jobs running at once (local)")
    parser.add_argument("--max_runs", type=int, default=None, help="run at most this many jobs")
    parser.add_argument(
        "--runlocal", action="store_true", help="tiny jobs (adds runlocal to the arg)"
    )
    parser.add_argument(
        "--train_module", default=None, help="default: the sweep config's TRAIN_MODULE"
    )
    parser.add_argument(
        "--pack",
        type=lambda value: value if value == AUTO_PACK else int(value),
        default=DEFAULT_PACK,
        help="train up to N jobs that differ only in member keys (seed, learning rate, loss "
        "scalars, dropout) in one process (1: a process a job); auto: all of them, vmapped "
        "members split into programs that fit the device's memory",
    )
    add_member_mode_flag(parser)
    slurm.add_slurm_flags(parser)
    args = parser.parse_args(argv)
    try:
        if args.status:
            return 1 if slurm_status.grid_status(args.workdir, args.wait, args.poll_seconds) else 0
        if args.config is None:
            parser.error("--config is required (unless --status)")
        resources = slurm.resources_from_flags(args)
        failed = run_sweep(
            args.config,
            args.workdir,
            args.jobs,
            args.max_runs,
            args.runlocal,
            args.train_module,
            args.pack,
            args.member_mode,
            args.cluster,
            resources,
            args.wait,
            args.poll_seconds,
        )
    except (slurm_status.SlurmError, FileNotFoundError) as error:
        print(f"launch.sweep: {error}", file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
