"""Run a config's ablation grid as local processes and tabulate the results.

    python -m launch.sweep --config=configs/sweep_vtfn.py:dataset=shapes_world \\
        --workdir=runs/grid [--jobs 2] [--max_runs N] [--runlocal]

The config file defines ``get_config(arg)``, ``get_sweep(hyper, arg)``,
``TRAIN_MODULE`` (the ``python -m`` module that trains a job, e.g.
``vtfn_jax.train`` or ``i2ce_jax.train``; ``--train_module`` overrides it) and
``METRICS`` (table column -> path into a job's results.json). ``get_sweep``
returns one dict per job built with ``hyper.sweep`` and ``hyper.product``
(big_vision's style). Every key is a ``config.*`` key; the job's config is
``get_config(arg)`` updated by ``ConfigDict.update_from_flattened_dict``, which
replaces existing fields only (a wrong key stops the sweep before any job runs)
and takes whole dicts for blocks such as ``config.model``. A value swept from a
mapping is labelled by its key, and a sweep whose key has no ``config.`` prefix
is a choice that sets several fields at once: its values map a label to a dict
of ``config.*`` keys (a dataset sets its source and its evaluation tasks).

Each job runs ``python -m TRAIN_MODULE --config=FILE:ARG --overrides=JOB/overrides.json``
in ``WORKDIR/<job name>``, logging to ``log.txt`` there. With ``--jobs N`` each job's
JAX takes 0.9/N of an accelerator's memory (``XLA_PYTHON_CLIENT_MEM_FRACTION``, unless
you set it or ``XLA_PYTHON_CLIENT_PREALLOCATE`` yourself), so N jobs share one GPU. A job whose folder
already holds ``results.json`` is skipped, so rerunning the command resumes the
grid; a failed job does not stop the others, but makes the exit code non-zero.
At the end ``aggregate`` writes ``WORKDIR/results.csv`` and ``WORKDIR/results.md``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import time
import types
from collections.abc import Mapping, Sequence
from pathlib import Path

from capsim.config_lib import apply_overrides
from capsim.workdir import RESULTS_FILE
from launch import slurm
from launch.aggregate import JOB_FILE, LOG_FILE, aggregate
from launch.pack import add_member_mode_flag, load_config_module, shape_of

REPO = Path(__file__).resolve().parent.parent  # array tasks run from here (python -m launch.pack)
CONFIG_PREFIX = "config."
OVERRIDES_FILE = "overrides.json"
MEM_FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"
# Members a process by default: with --jobs 2, 3.15x a process a job on 2 cores
# (bench/speed/grid_packing.py; 2.90x as one process of 8).
DEFAULT_PACK = 4
AUTO_PACK = "auto"  # --pack auto: a shape's members in one process, vmapped as many as fit
PACK_LOGS = "packs"  # a pack process's own output, beside the job folders
# Of one accelerator's memory, the share all jobs of a --jobs N grid take together.
GPU_MEMORY_SHARE = 0.9
MAX_NAME_CHARS = 200
NAME_HASH_CHARS = 8
UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._+=,-]")
LOCAL, SLURM = "local", "slurm"
CLUSTERS = (LOCAL, SLURM)
DEFAULT_POLL_SECONDS = 30.0


@dataclasses.dataclass(frozen=True)
class Choice:
    """A swept value with the label that names it in job folders and tables."""

    label: str
    value: object


def sweep(key: str, values: Sequence | Mapping[str, object]) -> list[dict]:
    """One job per value of ``key``; a mapping's keys label its values."""
    if isinstance(values, Mapping):
        return [{key: Choice(str(label), value)} for label, value in values.items()]
    return [{key: value} for value in values]


def product(sweeps: Sequence[Sequence[Mapping]]) -> list[dict]:
    """Every combination of the given sweeps, the last one varying fastest."""
    return [
        {k: v for job in combination for k, v in job.items()}
        for combination in itertools.product(*sweeps)
    ]


hyper = types.SimpleNamespace(sweep=sweep, product=product)


def param_label(key: str) -> str:
    """``config.loss.name`` -> ``loss``, ``config.model.hidden_dim`` -> ``hidden_dim``."""
    parts = key.split(".")
    return parts[-2] if parts[-1] == "name" and len(parts) > 2 else parts[-1]


def job_name(params: Mapping[str, object]) -> str:
    """``label=value`` pairs joined by commas, safe as a folder name."""
    name = ",".join(f"{label}={value}" for label, value in params.items())
    name = UNSAFE_NAME_CHARS.sub("_", name) or "job"
    if len(name) > MAX_NAME_CHARS:
        digest = hashlib.sha1(name.encode()).hexdigest()[:NAME_HASH_CHARS]
        name = f"{name[: MAX_NAME_CHARS - NAME_HASH_CHARS - 1]}-{digest}"
    return name


def _merge_arg(arg: str, settings: Mapping[str, object]) -> str:
    """Sets ``name=value`` items in a config argument, replacing earlier settings of the name."""
    items = {item.partition("=")[0]: item for item in filter(None, arg.split(","))}
    for name, value in settings.items():
        items[name] = name if value is True else f"{name}={value}"
    return ",".join(items.values())


@dataclasses.dataclass
class Job:
    name: str
    params: dict[str, object]  # label -> swept value's label, for names and tables
    overrides: dict[str, object]  # ``config.*`` key -> value

    def command(self, train_module: str, config: str, workdir: Path) -> list[str]:
        return [
            sys.executable,
            "-m",
            train_module,
            f"--config={config}",
            f"--workdir={workdir / self.name}",
            f"--overrides={workdir / self.name / OVERRIDES_FILE}",
        ]


def _job(entry: Mapping[str, object]) -> Job:
    overrides, params = {}, {}
    for key, value in entry.items():
        label = value.label if isinstance(value, Choice) else value
        value = value.value if isinstance(value, Choice) else value
        if key.startswith(CONFIG_PREFIX):
            overrides[key] = value
        elif isinstance(value, Mapping) and all(k.startswith(CONFIG_PREFIX) for k in value):
            overrides.update(value)
        else:
            raise KeyError(
                f"sweep key {key!r} must start with {CONFIG_PREFIX!r}, or map labels "
                f"to dicts of {CONFIG_PREFIX}* keys"
            )
        params[param_label(key)] = label
    if len(params) != len(entry):
        raise ValueError(f"sweep keys {sorted(entry)} share a column label; rename one")
    return Job(job_name(params), params, overrides)


def expand_grid(module: types.ModuleType, arg: str) -> list[Job]:
    """The sweep's jobs, each checked against the config it overrides."""
    jobs = [_job(entry) for entry in module.get_sweep(hyper, arg or None)]
    names = [job.name for job in jobs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"sweep has several jobs named {duplicates}")
    base = module.get_config(arg or None)
    for job in jobs:
        config = base.copy_and_resolve_references()
        config.lock()
        try:
            apply_overrides(config, job.overrides)
        except (KeyError, AttributeError, TypeError) as error:
            raise KeyError(f"job {job.name}: {error}") from error
    return jobs


def _write_json(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload, indent=2) + "\n")


def job_environment(jobs: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a job run beside ``jobs - 1`` others: each JAX process takes
    ``GPU_MEMORY_SHARE / jobs`` of an accelerator's memory instead of the 75% it
    preallocates by default, so that jobs sharing one GPU all start. A user's own
    ``XLA_PYTHON_CLIENT_MEM_FRACTION`` or ``XLA_PYTHON_CLIENT_PREALLOCATE`` is kept."""
    env = dict(environ)
    if jobs > 1 and not {MEM_FRACTION, "XLA_PYTHON_CLIENT_PREALLOCATE"} & set(env):
        env[MEM_FRACTION] = f"{GPU_MEMORY_SHARE / jobs:.3f}"
    return env


def _prepare(job: Job, workdir: Path, command: list[str], **fields: object) -> dict:
    job_dir = workdir / job.name
    job_dir.mkdir(parents=True, exist_ok=True)
    _write_json(job_dir / OVERRIDES_FILE, job.overrides)
    record = {"name": job.name, "params": job.params, "command": command, **fields}
    _write_json(job_dir / JOB_FILE, record)
    return record


def run_job(
    task: Sequence[Job], train_module: str, config: str, workdir: Path, env: Mapping | None = None
) -> list[bool]:
    """Runs one job (``task`` holds it alone) to completion, its output in log.txt."""
    (job,) = task
    command = job.command(train_module, config, workdir)
    record = _prepare(job, workdir, command)
    start = time.monotonic()
    with open(workdir / job.name / LOG_FILE, "w") as log:
        log.write(" ".join(command) + "\n\n")
        log.flush()
        returncode = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, env=env
        ).returncode
    _write_json(
        workdir / job.name / JOB_FILE,
        {**record, "returncode": returncode, "seconds": round(time.monotonic() - start, 1)},
    )
    return [returncode == 0]


def packs(jobs: Sequence[Job], size: int) -> list[list[Job]]:
    """Jobs that differ only in member keys (launch.pack.MEMBER_KEYS), up to ``size`` a
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
        _prepare(job, workdir, command, pack=names)
        (workdir / job.name / LOG_FILE).write_text(" ".join(command) + "\n\n")
    (workdir / PACK_LOGS).mkdir(exist_ok=True)
    with open(workdir / PACK_LOGS / f"{task[0].name}.log", "w") as log:
        returncode = subprocess.run(
            command, stdout=log, stderr=subprocess.STDOUT, env=env
        ).returncode
    ok = [(workdir / job.name / RESULTS_FILE).exists() for job in task]
    if returncode not in (0, 1):  # the process itself died: its unfinished members failed
        for job, finished in zip(task, ok, strict=True):
            record = json.loads((workdir / job.name / JOB_FILE).read_text())
            if not finished and "returncode" not in record:
                _write_json(workdir / job.name / JOB_FILE, {**record, "returncode": returncode})
    return ok


def send_to_slurm(
    workdir: Path,
    tasks: Sequence[Sequence[Job]],
    commands: Sequence[list[str]],
    packed: bool,
    resources: slurm.Resources,
    grid_facts: Mapping[str, str],
    metrics: Mapping[str, Sequence[str]],
    wait: bool,
    poll_seconds: float,
) -> int:
    """Submits the tasks (packs when ``packed``, else single jobs) as one job array (nothing
    when every job is done); with ``wait``, follows it and writes the table. Returns the number of failed jobs (0 when not waiting)."""
    if tasks:
        array_tasks = []
        root = workdir.resolve()
        for task, command in zip(tasks, commands, strict=True):
            names = [job.name for job in task]
            for job in task:
                _prepare(job, workdir, command, **({"pack": names} if packed else {}))
            log = root / PACK_LOGS / f"{names[0]}.log" if packed else root / names[0] / LOG_FILE
            array_tasks.append(slurm.Task(command, [root / n for n in names], log))
        array_id = slurm.submit(workdir, array_tasks, resources, REPO, grid_facts)
        for task_index, task in enumerate(tasks):
            for job in task:
                path = workdir / job.name / JOB_FILE
                record = json.loads(path.read_text())
                record["slurm"] = {"array_job_id": array_id, "task": task_index}
                _write_json(path, record)
        throttle = f", at most {resources.max_running} at once" if resources.max_running else ""
        print(
            f"submitted job array {array_id}: {len(tasks)} tasks{throttle} "
            f"(script {workdir / slurm.GRID_DIR}, their output in "
            f"{workdir / slurm.GRID_DIR / slurm.TASK_LOGS})",
            flush=True,
        )
        if not wait:
            print(f"follow it: python -m launch.sweep --status --workdir={workdir} [--wait]")
            return 0
    return finish_slurm_grid(workdir, metrics, poll_seconds if wait else None)


def finish_slurm_grid(
    workdir: Path, metrics: Mapping[str, Sequence[str]], poll_seconds: float | None
) -> int:
    """Shows each job's state (following the grid to its end when ``poll_seconds`` is
    given); once no task is queued, records the ended jobs and writes the table.
    Returns the number of failed jobs."""
    if poll_seconds is None:
        rows = slurm.job_states(workdir)
    else:
        rows = slurm.follow(workdir, poll_seconds)
    slurm.print_states(rows)
    if any(row["state"] in ("running", "requeued", "pending", "unknown") for row in rows):
        return 0
    slurm.mark_ended(workdir, rows)
    aggregate(workdir, metrics)
    print(f"wrote {workdir / 'results.csv'} and {workdir / 'results.md'}")
    return sum(row["state"] == "failed" for row in rows)


def grid_status(workdir: str | Path, wait: bool, poll_seconds: float) -> int:
    """``--status``: the jobs of the grid in ``workdir``; the table once all have ended."""
    workdir = Path(workdir)
    record = slurm.read_record(workdir)
    if "config" not in record:
        if not any(workdir.glob(f"*/{JOB_FILE}")):
            raise FileNotFoundError(f"{workdir} holds no grid (no job folders)")
        slurm.print_states(slurm.job_states(workdir))  # a local grid: its folders
        return 0
    metrics = load_config_module(Path(record["cwd"]) / record["config"].partition(":")[0]).METRICS
    return finish_slurm_grid(workdir, metrics, poll_seconds if wait else None)


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
    poll_seconds: float = DEFAULT_POLL_SECONDS,
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
        arg = _merge_arg(arg, {"runlocal": True})
    module = load_config_module(config_file)
    grid = expand_grid(module, arg)
    train_module = train_module or module.TRAIN_MODULE
    config = f"{config_file}:{arg}" if arg else config_file
    workdir = Path(workdir)
    if cluster == SLURM:  # before anything is written: a clear error, nothing submitted
        config = f"{Path(config_file).resolve()}:{arg}" if arg else str(Path(config_file).resolve())
        resources = resources or slurm.Resources()
        slurm.check_options(resources)
        slurm.check_not_owned(workdir)
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
        print(f"{len(tasks)} processes of {size} members each ({member_mode})", flush=True)
    if cluster == SLURM:  # the commands a local grid runs, with the workdir's full path
        root = workdir.resolve()
        commands = [
            pack_command(task, train_module, config, root, member_mode, fit_memory)
            if pack > 1
            else task[0].command(train_module, config, root)
            for task in tasks
        ]
        grid_facts = {"config": config, "cwd": os.getcwd(), "train_module": train_module}
        return send_to_slurm(
            workdir,
            tasks,
            commands,
            pack > 1,
            resources,
            grid_facts,
            module.METRICS,
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
    aggregate(workdir, module.METRICS)
    print(f"wrote {workdir / 'results.csv'} and {workdir / 'results.md'}")
    for job in failed:
        print(f"FAILED {job.name}: see {workdir / job.name / LOG_FILE}", file=sys.stderr)
    return len(failed)


def _slurm_flags(parser: argparse.ArgumentParser) -> None:
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
        default=slurm.Resources.signal_seconds,
        help="SIGUSR1 this long before a task's time limit: its members save, it requeues",
    )
    group.add_argument(
        "--max_requeues",
        type=int,
        default=slurm.Resources.max_requeues,
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
    _slurm_flags(parser)
    args = parser.parse_args(argv)
    try:
        if args.status:
            return 1 if grid_status(args.workdir, args.wait, args.poll_seconds) else 0
        if args.config is None:
            parser.error("--config is required (unless --status)")
        resources = slurm.Resources(
            partition=args.partition,
            time=args.time,
            gpus_per_task=args.gpus_per_task,
            cpus_per_task=args.cpus_per_task,
            mem=args.mem,
            account=args.account,
            extra=slurm.parse_slurm_options(args.slurm),
            max_running=args.max_running,
            signal_seconds=args.signal_seconds,
            max_requeues=args.max_requeues,
        )
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
    except (slurm.SlurmError, FileNotFoundError) as error:
        print(f"launch.sweep: {error}", file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
