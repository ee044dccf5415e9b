"""Orbax checkpointing of model, optimizer, grain iterator and step, in one place.

A checkpoint is an ``ocp.CheckpointManager`` step with up to four items:
``model`` and ``optimizer`` (pure-dict NNX states), ``data`` (the grain
iterator's state, one JSON per process) and ``meta`` (JSON: step, metrics).
Keeping the model in its own item lets a scorer restore it without building an
optimizer. Restores go into abstract (shape/dtype) targets built from the config.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import grain
import jax
import orbax.checkpoint as ocp
from flax import nnx

from capsim.errors import CheckpointError

CHECKPOINT_DIR = "checkpoints"
BEST_DIR = "best"


class _IteratorSnapshot:
    """A grain iterator's state taken now, for grain's checkpoint handler.

    Saves are asynchronous: the handler may run after the trainer has drawn more
    batches, so it gets the state as it was at ``save`` (the JSON bytes grain
    writes for a DatasetIterator), not the live iterator.
    """

    def __init__(self, iterator: grain.DatasetIterator):
        self._state = json.dumps(iterator.get_state(), indent=4).encode()

    def get_state(self) -> bytes:
        return self._state


def _abstract(state: nnx.State) -> dict:
    return jax.tree.map(ocp.utils.to_shape_dtype_struct, nnx.to_pure_dict(state))


class Checkpointer:
    """Saves and restores training state under one directory."""

    def __init__(self, directory: str | Path, *, max_to_keep: int = 2, read_only: bool = False):
        self.directory = Path(directory).absolute()
        if read_only:
            options = ocp.CheckpointManagerOptions(read_only=True, save_interval_steps=0)
        else:
            options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True)
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def save(
        self,
        step: int,
        *,
        model: nnx.Module,
        optimizer: nnx.Optimizer | None = None,
        data_iterator: grain.DatasetIterator | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        """Starts saving ``step``. One process returns once the arrays are copied and
        writes the files in the background (the next save, ``wait`` or ``close``
        waits for them); a multi-process run waits here."""
        items = {
            "model": ocp.args.StandardSave(nnx.to_pure_dict(nnx.state(model))),
            "meta": ocp.args.JsonSave({"step": int(step), **dict(meta or {})}),
        }
        if optimizer is not None:
            items["optimizer"] = ocp.args.StandardSave(nnx.to_pure_dict(nnx.state(optimizer)))
        if data_iterator is not None:
            items["data"] = grain.checkpoint.CheckpointSave(_IteratorSnapshot(data_iterator))
        self._manager.save(step, args=ocp.args.Composite(**items), force=True)
        if jax.process_count() > 1:
            # orbax 0.12's background finalize failed its check that every process
            # wrote array metadata in the 2-process tests; several processes wait.
            self._manager.wait_until_finished()

    def restore(
        self,
        *,
        model: nnx.Module,
        optimizer: nnx.Optimizer | None = None,
        data_iterator: grain.DatasetIterator | None = None,
        step: int | None = None,
    ) -> dict[str, Any]:
        """Restores into the given live objects (in place) and returns the metadata."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise CheckpointError(f"no checkpoint found in {self.directory}")
        model_state = nnx.state(model)
        items = {
            "model": ocp.args.StandardRestore(_abstract(model_state)),
            "meta": ocp.args.JsonRestore(),
        }
        if optimizer is not None:
            opt_state = nnx.state(optimizer)
            items["optimizer"] = ocp.args.StandardRestore(_abstract(opt_state))
        if data_iterator is not None:
            items["data"] = grain.checkpoint.CheckpointRestore(data_iterator)
        try:
            restored = self._manager.restore(step, args=ocp.args.Composite(**items))
        except Exception as e:  # orbax raises many types for unreadable files
            raise CheckpointError(
                f"checkpoint step {step} in {self.directory} is unreadable or does not match "
                f"this model's config: {type(e).__name__}: {e}"
            ) from e
        nnx.replace_by_pure_dict(model_state, restored["model"])
        nnx.update(model, model_state)
        if optimizer is not None:
            nnx.replace_by_pure_dict(opt_state, restored["optimizer"])
            nnx.update(optimizer, opt_state)
        return dict(restored["meta"])

    def restore_newest_usable(self, **objects: Any) -> dict[str, Any]:
        """Restores the newest checkpoint that reads back, falling back past damaged ones.

        Each skipped checkpoint is logged with the reason. When checkpoints exist
        but none is usable, raises CheckpointError naming the directory: a run
        never silently starts again from step 0 over a workdir that had them.
        """
        failures, damaged = [], []
        for step in sorted(self._manager.all_steps(), reverse=True):
            try:
                meta = self.restore(step=step, **objects)
            except CheckpointError as error:
                failures.append(f"step {step}: {error}")
                damaged.append(step)
                logging.warning(
                    "checkpoint step %d in %s is damaged; trying an older one", step, self.directory
                )
                continue
            if failures:
                self._set_aside(damaged)
                logging.warning(
                    "restored step %d of %s after skipping: %s",
                    step,
                    self.directory,
                    "; ".join(failures),
                )
            return meta
        raise CheckpointError(
            f"{self.directory} holds checkpoints but none is usable ({'; '.join(failures)}); "
            "move the folder away to start again from step 0"
        )

    def _set_aside(self, steps: list[int]) -> None:
        """Renames damaged step folders to ``<step>.damaged``: kept for inspection, and out
        of the way of the steps the resumed run saves again."""
        for step in steps:
            folder = self.directory / str(step)
            if folder.exists():
                target, n = folder.with_name(f"{step}.damaged"), 1
                while target.exists():
                    target, n = folder.with_name(f"{step}.damaged-{n}"), n + 1
                folder.rename(target)
                logging.warning("moved the damaged checkpoint to %s", target)
        self._manager.reload()

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.close()


def find_model_checkpoint(path: str | Path) -> Path:
    """Resolves a workdir or checkpoint directory to the directory to restore a model from.

    Accepts a training workdir (prefers ``best/``, then ``checkpoints/``) or a
    manager directory itself. Raises CheckpointError naming the path otherwise.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint path {path} does not exist")
    for candidate in (path / BEST_DIR, path / CHECKPOINT_DIR, path):
        if candidate.is_dir() and any(p.name.isdigit() for p in candidate.iterdir()):
            return candidate
    raise CheckpointError(
        f"{path} holds no checkpoint (expected numbered step folders in {path}, "
        f"{path / BEST_DIR} or {path / CHECKPOINT_DIR})"
    )


def restore_model(path: str | Path, model: nnx.Module) -> dict[str, Any]:
    """Loads the weights of a training workdir (``best/``, else ``checkpoints/``) or of a
    checkpoint folder into ``model``, in place, and returns the checkpoint's metadata."""
    manager = Checkpointer(find_model_checkpoint(path), read_only=True)
    try:
        return manager.restore(model=model)
    finally:
        manager.close()
