"""A grid and its jobs, as every launcher sees them: the config file, ``hyper.sweep`` /
``hyper.product`` (big_vision's style) and the jobs they expand to, which jobs may share a
process, the ``--member_mode`` flag, and a job folder's record (``job.json``, written
here only).

``launch.sweep`` (a grid), ``launch.tasks`` (its processes), ``launch.slurm`` (the same
grid as a job array) and ``launch.pack`` (one process of a grid's jobs) import this module; ``launch.pack``
imports neither of the others.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import itertools
import json
import re
import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path

from capsim.config_lib import (
    HYPERPARAMETERS,
    LOSS_SCALARS,
    MEMBER_MODES,
    apply_overrides,
    member_mode_name,
)

JOB_FILE = "job.json"
LOG_FILE = "log.txt"
OVERRIDES_FILE = "overrides.json"
PACK_LOGS = "packs"  # a pack process's own output, beside the job folders
CONFIG_PREFIX = "config."
MAX_NAME_CHARS = 200
NAME_HASH_CHARS = 8
UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._+=,-]")
# Override keys whose values may differ between the members of one pack: the seed and
# the numbers the optimizer and the losses declare as theirs (capsim.config_lib), and
# dropout. The rest (encoder, sizes, loss kind, batch size, data) set a shape or a
# function, so jobs that differ there train in separate processes.
MEMBER_KEYS = (
    "config.seed",
    *(f"config.optimizer.{name}" for name in HYPERPARAMETERS),
    *(f"config.loss.{name}" for name in LOSS_SCALARS),
    "config.model.dropout",
)


def load_config_module(path: str | Path) -> types.ModuleType:
    """A grid config file as a module, with what a grid needs of it.

    Raises:
        FileNotFoundError: no such file.
        AttributeError: it defines no ``get_config``, ``get_sweep``, ``TRAIN_MODULE`` or
            ``METRICS`` (the first missing one named).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"grid config {path} does not exist")
    spec = importlib.util.spec_from_file_location(f"grid_config_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for needed in ("get_config", "get_sweep", "TRAIN_MODULE", "METRICS"):
        if not hasattr(module, needed):
            raise AttributeError(f"grid config {path} defines no {needed}")
    return module


def shape_of(overrides: dict[str, object]) -> str:
    """What jobs must share to be packed in one process: their overrides but the member keys."""
    return json.dumps(
        {k: v for k, v in overrides.items() if k not in MEMBER_KEYS}, sort_keys=True, default=str
    )


def add_member_mode_flag(parser: argparse.ArgumentParser) -> None:
    """``--member_mode``, shared by launch.sweep and launch.pack."""
    parser.add_argument(
        "--member_mode",
        type=member_mode_name,
        choices=("auto", *MEMBER_MODES),
        default="auto",
        help="how a pack's members train: one vmapped step, in_turn, or (auto) the faster "
        "for the backend and model, as measured (capsim.train.members.member_mode)",
    )


def read_job(job_dir: Path) -> dict:
    """A job folder's record; a folder without one gets its name only."""
    path = Path(job_dir) / JOB_FILE
    return json.loads(path.read_text()) if path.exists() else {"name": Path(job_dir).name}


def write_job(job_dir: Path, record: dict) -> dict:
    """Replaces a job folder's record (a job being sent afresh); returns it."""
    (Path(job_dir) / JOB_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return record


def update_job(job_dir: Path, **fields: object) -> dict:
    """Adds ``fields`` to a job folder's record (its return code, array task, ...)."""
    return write_job(job_dir, {**read_job(job_dir), **fields})


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


def merge_arg(arg: str, settings: Mapping[str, object]) -> str:
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


def job_of(entry: Mapping[str, object]) -> Job:
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
    jobs = [job_of(entry) for entry in module.get_sweep(hyper, arg or None)]
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


def prepare_job(job: Job, workdir: Path, command: list[str], **fields: object) -> dict:
    """A job's folder, its overrides and a fresh record, before it runs or is sent."""
    job_dir = workdir / job.name
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / OVERRIDES_FILE).write_text(json.dumps(job.overrides, indent=2) + "\n")
    return write_job(
        job_dir, {"name": job.name, "params": job.params, "command": command, **fields}
    )
