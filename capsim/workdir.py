"""The training workdir's contract: what a run writes there, under which names.

    W/config.json     the run's config (save_config, load_config): rebuilds its model
    W/vocab.json      its vocabulary (capsim.text.Vocab.save / load)
    W/data.json       VTFN only: the feature source and the image-feature size
    W/metrics.jsonl   one JSON row per logged step (capsim.train.metrics)
    W/tensorboard/    the same scalars for TensorBoard
    W/checkpoints/    orbax steps (capsim.train.checkpoint)
    W/results.json    the final report (write_results)
    W/profile/        a jax.profiler trace, when profile_steps asks for one
    W/.run.lock       held by the live run (capsim.train.lock)
    W/previous-run-N/ an older run's files, moved aside by ``start_over`` (move_run_aside)

Only process 0 writes, so a multi-host run produces one set of files. Each
paper package says how its model kinds are loaded back (i2ce_jax.scorer,
vtfn_jax.workdir); both read these names from here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import ml_collections

CONFIG_FILE = "config.json"
VOCAB_FILE = "vocab.json"
DATA_FILE = "data.json"
METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
CHECKPOINT_DIR = "checkpoints"
RESULTS_FILE = "results.json"
PROFILE_DIR = "profile"
LOCK_FILE = ".run.lock"
PREVIOUS_RUN_PREFIX = "previous-run-"
# What a run leaves that the next run from step 0 would overwrite or append to.
RUN_OUTPUTS = (CONFIG_FILE, METRICS_FILE, RESULTS_FILE, TENSORBOARD_DIR, CHECKPOINT_DIR)


def is_main_process() -> bool:
    return jax.process_index() == 0


def save_config(config: ml_collections.ConfigDict, workdir: str | Path) -> None:
    """Writes config.json so a run (and its checkpoints) can be rebuilt from the workdir."""
    if not is_main_process():
        return
    path = Path(workdir) / CONFIG_FILE
    path.write_text(config.to_json_best_effort(indent=2, sort_keys=True) + "\n")


def load_config(workdir: str | Path) -> ml_collections.ConfigDict:
    """The config a run saved in ``workdir``, in today's keys (``upgraded``)."""
    path = Path(workdir) / CONFIG_FILE
    return ml_collections.ConfigDict(upgraded(json.loads(path.read_text())))


def upgraded(config: dict) -> dict:
    """A saved config dict in today's keys, so older workdirs load and resume as they were.

    Runs from before the shapes world became a caption source (capsim.data.sources.SOURCES)
    chose it with ``data.source``; that key is folded into ``data.sources``. Runs from
    before ``data.seed`` drew their held-out images with ``config.seed``; that becomes
    their ``data.seed``.
    """
    data = config.get("data")
    if not isinstance(data, dict):
        return config
    data = dict(data)
    if "dev_images" in data and "seed" not in data:
        data["seed"] = config.get("seed", 0)
    if data.pop("source", None) == "shapes_world":
        data["sources"] = ["shapes_world"]
    return {**config, "data": data}


def write_results(workdir: str | Path, results: Mapping[str, Any]) -> Path:
    """Writes the final report as results.json (process 0 only); returns its path."""
    path = Path(workdir) / RESULTS_FILE
    if is_main_process():
        path.write_text(json.dumps(results, indent=2) + "\n")
    return path


def move_run_aside(workdir: str | Path) -> Path:
    """Moves a run's outputs (RUN_OUTPUTS) into ``W/previous-run-N``, the first free N,
    so that a new run can start at step 0 without deleting anything; returns that folder.

    Process 0 moves; every process returns the same folder, once it is there.
    """
    workdir = Path(workdir)
    number = 1
    while (workdir / f"{PREVIOUS_RUN_PREFIX}{number}").exists():
        number += 1
    kept = workdir / f"{PREVIOUS_RUN_PREFIX}{number}"
    _sync_processes("move_run_aside: folder chosen")
    if is_main_process():
        kept.mkdir()
        for name in RUN_OUTPUTS:
            if (workdir / name).exists():
                (workdir / name).rename(kept / name)
    _sync_processes("move_run_aside: moved")
    return kept


def _sync_processes(name: str) -> None:
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)
