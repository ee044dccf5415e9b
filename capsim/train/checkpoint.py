"""Orbax checkpointing of a training run: model, optimizer, grain iterator and step together.

The format (items, ranking key) and reading a model back live in
capsim.checkpoints, below the trainer; this module writes steps and resumes
training from them. Which steps are written and kept is orbax's own policy:
saves every ``save_every`` steps or at an agreed preemption, plus the steps the
trainer forces (evaluations, the last step); kept are the newest ``keep`` and
the best evaluated step, ranked by ``SELECTION_KEY`` in the step's orbax metrics.
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
from orbax.checkpoint import checkpoint_managers as policies

from capsim.checkpoints import SELECTION_KEY, open_manager, restore_states, selection_score
from capsim.errors import CheckpointError, UnusableCheckpointsError


class _IteratorSnapshot:
    """A grain iterator's state as it was after a given batch, for grain's checkpoint handler.

    Saves are asynchronous and the trainer may have drawn batches ahead (device
    prefetch), so the handler gets the state of the batch last trained on (the
    JSON bytes grain writes for a DatasetIterator), not the live iterator.
    """

    def __init__(self, state: Mapping[str, Any]):
        self._state = json.dumps(state, indent=4).encode()

    def get_state(self) -> bytes:
        return self._state


def selection_metrics(metric: str, value: float, mode: str) -> dict[str, float]:
    """The orbax metrics of an evaluated step: the metric and its ranking score."""
    return {metric: value, SELECTION_KEY: value if mode == "max" else -value}


class Checkpointer:
    """Saves and restores training state under one directory, by orbax's policies.

    ``save_every``: the fixed save interval (0: only forced and preemption saves);
    ``keep``: the newest steps kept, besides the best evaluated one.
    """

    def __init__(self, directory: str | Path, *, keep: int = 2, save_every: int = 0):
        self.directory = Path(directory).absolute()
        saves = [policies.PreemptionCheckpointingPolicy()]
        if save_every:
            saves.append(policies.FixedIntervalPolicy(save_every))
        options = ocp.CheckpointManagerOptions(
            create=True,
            best_fn=selection_score,  # best_step() ranks by the score
            save_decision_policy=policies.AnySavePolicy(saves),
            preservation_policy=policies.AnyPreservationPolicy(
                [
                    policies.LatestN(n=keep),
                    policies.BestN(
                        get_metric_fn=selection_score, n=1, keep_checkpoints_without_metrics=False
                    ),
                ]
            ),
        )
        # The manager reads every step's metrics when it starts: a damaged one would
        # stop it before restore_newest_usable could fall back past it, so it waits
        # aside (and goes back if no other step restores either).
        unreadable = _steps_with_unreadable_metrics(self.directory)
        if unreadable and set(unreadable) >= set(_step_numbers(self.directory)):
            raise _unusable(self.directory, [f"step {s}: metrics unreadable" for s in unreadable])
        self._unreadable_metrics = _set_aside(self.directory, unreadable)
        self._manager = open_manager(self.directory, options)
        self._saved_metrics: dict[int, dict[str, float]] = {}

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def holds_checkpoints(self) -> bool:
        """Whether a run wrote checkpoints here: a step, or one set aside as damaged."""
        return self.latest_step() is not None or any(self.directory.glob("*.damaged*"))

    def best_step(self) -> int | None:
        """The kept step with the best evaluation (orbax's ranking), None before the first."""
        return self._manager.best_step()

    def metrics(self, step: int) -> dict[str, float]:
        """The orbax metrics saved with ``step`` ({} for a step saved without an evaluation).

        Steps saved by this process are answered from memory, since a background
        save may not have written its files yet.
        """
        if step not in self._saved_metrics:
            self._saved_metrics[step] = dict(self._manager.metrics(step) or {})
        return self._saved_metrics[step]

    def reached_preemption(self, step: int) -> bool:
        """True at the step every process agreed to save at after a preemption notice."""
        return self._manager.reached_preemption(step)

    def save(
        self,
        step: int,
        *,
        model: nnx.Module,
        optimizer: nnx.Optimizer | None = None,
        data_state: Mapping[str, Any] | None = None,
        metrics: Mapping[str, float] | None = None,
        force: bool = False,
    ) -> bool:
        """Saves ``step`` when ``force`` or the save policy says so; returns whether it did.

        One process returns once the arrays are copied and writes the files in the
        background (the next save, ``wait`` or ``close`` waits for them); a
        multi-process run waits here. ``metrics`` (``selection_metrics``) rank the step.
        """
        items = {
            "model": ocp.args.StandardSave(nnx.to_pure_dict(nnx.state(model))),
            "meta": ocp.args.JsonSave({"step": int(step)}),
        }
        if optimizer is not None:
            items["optimizer"] = ocp.args.StandardSave(nnx.to_pure_dict(nnx.state(optimizer)))
        if data_state is not None:
            items["data"] = grain.checkpoint.CheckpointSave(_IteratorSnapshot(data_state))
        metrics = dict(metrics or {})
        saved = self._manager.save(
            step, args=ocp.args.Composite(**items), metrics=metrics or None, force=force
        )
        if saved:
            self._saved_metrics[step] = metrics
        if saved and jax.process_count() > 1:
            # orbax 0.12's background finalize failed its check that every process
            # wrote array metadata in the 2-process tests; several processes wait.
            self._manager.wait_until_finished()
        return saved

    def should_save(self, step: int) -> bool:
        return self._manager.should_save(step)

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
        live = {"model": model, "optimizer": optimizer}
        states = {name: nnx.state(obj) for name, obj in live.items() if obj is not None}
        extra = {}
        if data_iterator is not None:
            extra["data"] = grain.checkpoint.CheckpointRestore(data_iterator)
        meta = restore_states(self._manager, step, states, extra)
        for name, state in states.items():
            nnx.update(live[name], state)
        return meta

    def restore_newest_usable(self, **objects: Any) -> dict[str, Any]:
        """Restores the newest checkpoint that reads back, falling back past damaged ones.

        Each skipped checkpoint is logged with the reason, and moved aside once an
        older one has restored. When none is usable, raises UnusableCheckpointsError
        naming the directory and changes nothing: a run never silently starts again
        from step 0 over a workdir that had checkpoints.
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
                _set_aside(self.directory, damaged)
                self._manager.reload()
                logging.warning(
                    "restored step %d of %s after skipping: %s",
                    step,
                    self.directory,
                    "; ".join(failures),
                )
            return meta
        for folder, target in self._unreadable_metrics:  # nothing changes when nothing restores
            target.rename(folder)
            failures.append(f"step {folder.name}: metrics unreadable")
        damaged = sorted(p.name for p in self.directory.glob("*.damaged*"))
        raise _unusable(self.directory, failures or [f"only damaged steps: {', '.join(damaged)}"])

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.close()


def _unusable(directory: Path, failures: list[str]) -> UnusableCheckpointsError:
    return UnusableCheckpointsError(
        f"{directory} holds checkpoints but none is usable ({'; '.join(failures)}). Nothing "
        "was changed. To train again from step 0 in this workdir, rerun with "
        "--config.start_over=True: the old run's files are moved aside and kept"
    )


def _step_numbers(directory: Path) -> list[int]:
    return [int(p.name) for p in directory.glob("*") if p.name.isdigit() and p.is_dir()]


def _steps_with_unreadable_metrics(directory: Path) -> list[int]:
    """Steps under ``directory`` whose orbax metrics file is not JSON any more."""
    damaged = []
    for path in directory.glob("*/metrics/metrics"):
        if not path.parent.parent.name.isdigit():
            continue
        try:
            json.loads(path.read_text())
        except (ValueError, OSError):
            damaged.append(int(path.parent.parent.name))
    return damaged


def _set_aside(directory: Path, steps: list[int]) -> list[tuple[Path, Path]]:
    """Renames damaged step folders to ``<step>.damaged``: kept for inspection, and out
    of the way of the steps the resumed run saves again. Returns (folder, new name) pairs."""
    moved = []
    for step in steps:
        folder = directory / str(step)
        if folder.exists():
            target, n = folder.with_name(f"{step}.damaged"), 1
            while target.exists():
                target, n = folder.with_name(f"{step}.damaged-{n}"), n + 1
            folder.rename(target)
            moved.append((folder, target))
            logging.warning(
                "checkpoint step %d in %s is damaged; moved it to %s", step, directory, target
            )
    return moved
