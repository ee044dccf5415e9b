"""The checkpoint format, for training and inference alike, and reading a model back.

A training run's checkpoints (written by capsim.train.checkpoint) are the steps
of one ``ocp.CheckpointManager`` in ``W/checkpoints``, each with up to four
items: ``model`` and ``optimizer`` (pure-dict NNX states), ``data`` (the grain
iterator's state) and ``meta`` (JSON: step). Evaluated steps carry orbax
metrics with ``SELECTION_KEY``, so any reader ranks them without the run's
config. Keeping the model in its own item lets a scorer restore it without an
optimizer; this module does so without importing the trainer.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp
from flax import nnx

from capsim.errors import CheckpointError
from capsim.workdir import CHECKPOINT_DIR

# Where workdirs written before the single manager kept their best model; still read.
LEGACY_BEST_DIR = "best"
# In a step's orbax metrics: the early-stopping metric, negated when lower is
# better, so any reader ranks checkpoints without the run's config.
SELECTION_KEY = "selection_score"


def selection_score(metrics: Mapping[str, float]) -> float:
    """A step's rank among the evaluated ones (orbax's ``best_fn``)."""
    return metrics[SELECTION_KEY]


def open_manager(directory: Path, options: ocp.CheckpointManagerOptions) -> ocp.CheckpointManager:
    """The orbax manager of ``directory``; unreadable bookkeeping is a CheckpointError naming it."""
    try:
        return ocp.CheckpointManager(directory, options=options)
    except (ValueError, OSError) as error:  # UnicodeDecodeError is a ValueError
        raise CheckpointError(
            f"the checkpoints in {directory} do not read back: {type(error).__name__}: {error}"
        ) from error


def restore_states(
    manager: ocp.CheckpointManager,
    step: int,
    states: Mapping[str, nnx.State],
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Restores the named NNX ``states`` (e.g. ``model``, ``optimizer``) of ``step`` in place,
    plus the orbax restore ``extra`` items; returns the step's ``meta``.

    The states give the shapes and dtypes (orbax restores into abstract targets).
    """
    items = {
        name: ocp.args.StandardRestore(
            jax.tree.map(ocp.utils.to_shape_dtype_struct, nnx.to_pure_dict(state))
        )
        for name, state in states.items()
    }
    items["meta"] = ocp.args.JsonRestore()
    items.update(extra or {})
    try:
        restored = manager.restore(step, args=ocp.args.Composite(**items))
    except Exception as e:  # orbax raises many types for unreadable files
        raise CheckpointError(
            f"checkpoint step {step} in {manager.directory} is unreadable or does not match "
            f"this model's config: {type(e).__name__}: {e}"
        ) from e
    for name, state in states.items():
        nnx.replace_by_pure_dict(state, restored[name])
    return dict(restored["meta"])


def find_model_checkpoint(path: str | Path) -> Path:
    """Resolves a workdir or checkpoint directory to the directory to restore a model from.

    Accepts a training workdir (``checkpoints/``; a workdir written before the
    single manager has its best model in ``best/``, which wins) or a manager
    directory itself. Raises CheckpointError naming the path otherwise.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint path {path} does not exist")
    for candidate in (path / LEGACY_BEST_DIR, path / CHECKPOINT_DIR, path):
        if candidate.is_dir() and any(p.name.isdigit() for p in candidate.iterdir()):
            return candidate
    raise CheckpointError(
        f"{path} holds no checkpoint (expected numbered step folders in {path} "
        f"or {path / CHECKPOINT_DIR})"
    )


def restore_model(path: str | Path, model: nnx.Module) -> dict[str, Any]:
    """Loads the weights of a training workdir or checkpoint folder into ``model``, in
    place: the best evaluated step, else the newest. Returns the checkpoint's metadata."""
    directory = find_model_checkpoint(path).absolute()
    options = ocp.CheckpointManagerOptions(
        read_only=True, save_interval_steps=0, best_fn=selection_score
    )
    manager = open_manager(directory, options)
    try:
        step = manager.best_step()
        step = manager.latest_step() if step is None else step
        if step is None:
            raise CheckpointError(f"no checkpoint found in {directory}")
        state = nnx.state(model)
        meta = restore_states(manager, step, {"model": state})
        nnx.update(model, state)
        return meta
    finally:
        manager.close()
