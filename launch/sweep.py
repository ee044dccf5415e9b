"""Run a config's ablation grid, on this machine or as one SLURM job array, and tabulate it.

    python -m launch.sweep --config=configs/sweep_vtfn.py:dataset=shapes_world --workdir=runs/grid [--pack 4] [--jobs 2] [--max_runs N] [--runlocal]
    python -m launch.sweep --config=... --workdir=DIR --cluster=slurm [--wait] [resources]
    python -m launch.sweep --status [--wait] --workdir=DIR

The grid config (``get_config``, ``get_sweep(hyper, arg)``, ``TRAIN_MODULE``, ``METRICS``)
expands to its jobs as launch.grid says; a wrong key stops the grid before any job runs.
The grid's processes are its tasks (launch.tasks), built once for either path.
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
import dataclasses
import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path

from capsim.workdir import RESULTS_FILE
from launch import slurm, slurm_status
from launch.finish import finish_grid
from launch.grid import (
    LOG_FILE,
    Job,
    add_member_mode_flag,
    expand_grid,
    load_config_module,
    merge_arg,
)
from launch.tasks import Packing, make_tasks, run_tasks

# Members a process by default: with --jobs 2, 3.15x a process a job on 2 cores
# (bench/speed/grid_packing.py; 2.90x as one process of 8).
DEFAULT_PACK = 4
AUTO_PACK = "auto"  # --pack auto: a shape's members in one process, vmapped as many as fit
LOCAL, SLURM = "local", "slurm"
CLUSTERS = (LOCAL, SLURM)


@dataclasses.dataclass(frozen=True)
class SweepGrid:
    """A grid config as it runs: its module and arg, its jobs, the trainer, and the
    ``--config`` value its processes get."""

    module: types.ModuleType
    arg: str
    jobs: list[Job]
    train_module: str
    config: str


def load_grid(config: str, runlocal: bool, train_module: str | None, absolute: bool) -> SweepGrid:
    """The grid of ``config`` (``FILE[:ARG]``); ``absolute``: the file's full path in the
    commands, as array tasks that run from the repository need it."""
    config_file, _, arg = config.partition(":")
    if runlocal:
        arg = merge_arg(arg, {"runlocal": True})
    module = load_config_module(config_file)
    jobs = expand_grid(module, arg)
    path = str(Path(config_file).resolve()) if absolute else config_file
    command_config = f"{path}:{arg}" if arg else path
    return SweepGrid(module, arg, jobs, train_module or module.TRAIN_MODULE, command_config)


def packing_of(pack: int | str, member_mode: str, jobs: int) -> Packing:
    """``--pack`` (a number or auto) and ``--member_mode`` as a Packing."""
    fit_memory = pack == AUTO_PACK  # every member of a shape in one process, as many as fit
    size = sys.maxsize if fit_memory else int(pack)
    if jobs < 1 or size < 1:
        raise ValueError(f"--jobs and --pack must be >= 1 (or --pack auto), got {jobs} and {size}")
    return Packing(size, member_mode, fit_memory)


def pending_jobs(
    grid: SweepGrid, workdir: Path, max_runs: int | None, verb: str
) -> tuple[list[Job], int]:
    """The jobs without results (at most ``max_runs``), announced, and how many are done."""
    pending = [job for job in grid.jobs if not (workdir / job.name / RESULTS_FILE).exists()]
    done = len(grid.jobs) - len(pending)
    if max_runs is not None:
        pending = pending[:max_runs]
    print(f"grid of {len(grid.jobs)}: {done} already done, {verb} {len(pending)}", flush=True)
    return pending, done


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
    processes at once. ``cluster="slurm"`` sends the same tasks as one SLURM job array
    instead (launch.slurm, ``resources`` each task's), and with ``wait`` follows it to
    the end and writes the table; without, it returns 0 once the array is queued."""
    packing = packing_of(pack, member_mode, jobs)
    if cluster not in CLUSTERS:
        raise ValueError(f"--cluster {cluster!r}: expected one of {CLUSTERS}")
    on_slurm = cluster == SLURM
    grid = load_grid(config, runlocal, train_module, absolute=on_slurm)
    workdir = Path(workdir)
    if on_slurm:  # before anything is written: a clear error, nothing submitted
        resources = resources or slurm.Resources()
        slurm.check_options(resources)
        slurm_status.check_not_owned(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    pending, done = pending_jobs(grid, workdir, max_runs, "sending" if on_slurm else "running")
    root = workdir.resolve() if on_slurm else workdir  # array tasks need the full path
    tasks = make_tasks(pending, packing, grid.train_module, grid.config, root)
    if packing.packed:
        print(packing.describe(len(tasks)), flush=True)
    if on_slurm:
        facts = {"config": grid.config, "cwd": os.getcwd(), "train_module": grid.train_module}
        return slurm.send_grid(
            workdir, tasks, resources, facts, grid.module, grid.arg, wait, poll_seconds
        )
    failed = run_tasks(tasks, jobs, done, len(grid.jobs))
    finish_grid(workdir, grid.module, grid.arg)
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
