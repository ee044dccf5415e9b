"""Checks a run makes on its workdir before any work: writable, free, the same model."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import ml_collections

from capsim.errors import CapsimError
from capsim.train.lock import check_workdir_free
from capsim.workdir import CONFIG_FILE, upgraded

# Config subtrees that shape the model or its vocabulary. The data may move, and how
# the step computes may change: the compute dtype (parameters are float32 either way),
# I2CE's logits dtype and its decoder's unrolling (i2ce_jax.model; workdirs written
# before those keys lack them).
MODEL_DEFINING = ("model", "data")
MOVABLE_KEYS = ("data.data_dir", "model.dtype", "model.logits_dtype", "model.decoder_unroll")


def _flat(tree: object, prefix: str = "") -> dict[str, object]:
    if isinstance(tree, dict):
        flat: dict[str, object] = {}
        for key, value in tree.items():
            flat.update(_flat(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: tree}


def _model_defining(config: dict) -> dict[str, object]:
    """The dotted keys of a config dict that shape the model or its vocabulary."""
    flat = {}
    for part in MODEL_DEFINING:
        flat.update(_flat(config.get(part, {}), f"{part}."))
    return {k: v for k, v in flat.items() if k not in MOVABLE_KEYS}


def check_workdir(config: ml_collections.ConfigDict, workdir: str | Path) -> Path:
    """Creates ``workdir`` and checks, before any work, that a run can use it.

    Errors (CapsimError naming the folder or the keys): a workdir that cannot be
    written; one a live run holds (capsim.train.lock); a ``config.json`` there
    from a run whose model or data keys differ from this config's (resuming
    would mix two models), unless the config sets
    ``allow_config_change`` (``--config.allow_config_change=True``).
    """
    workdir = Path(workdir)
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=workdir, prefix=".write_test"):
            pass  # a name of its own per process: hosts sharing the workdir do not collide
    except OSError as error:
        raise CapsimError(f"workdir {workdir} is not writable ({error.strerror})") from error
    check_workdir_free(workdir)  # a live run there: refused before any data is read
    saved_file = workdir / CONFIG_FILE
    if saved_file.exists() and not config.get("allow_config_change", False):
        saved = _model_defining(upgraded(json.loads(saved_file.read_text())))
        current = _model_defining(json.loads(config.to_json_best_effort()))
        changed = sorted(k for k in saved.keys() | current.keys() if saved.get(k) != current.get(k))
        if changed:
            raise CapsimError(
                f"{saved_file} is from a run with other settings for {changed}: resuming would mix "
                "two models. Use another workdir, or pass --config.allow_config_change=True"
            )
    return workdir
