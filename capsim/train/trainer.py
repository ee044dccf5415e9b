"""``Trainer``: the one place a step is trained, for every model in the library.

A model-specific ``loss_fn(model, batch, key) -> (loss, metrics)`` is all a paper
package supplies. The step is a pure function over ``(graphdef, state)`` so the
jit shardings and orbax see plain pytrees; it is compiled over a 1-D data mesh
(batch sharded, parameters replicated) with the state donated. ``Trainer.fit``
runs the loop with its hooks: log, evaluate, checkpoint (orbax's policies, see
capsim.train.checkpoint), early stopping on orbax's best step, preemption and
peer failures (capsim.train.faults), an optional profiler trace.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import grain
import jax
import ml_collections
import numpy as np
import optax
from flax import nnx

from capsim import mesh as mesh_lib
from capsim.data import device_tables
from capsim.data.device_tables import gather_tables
from capsim.task import LossFn
from capsim.train.lock import hold_workdir
from capsim.train.loop import PeriodicEval, Run, TrainResult
from capsim.train.optimizer import make_optimizer, trainable


def make_train_step(graphdef: nnx.GraphDef, loss_fn: LossFn, wrt: nnx.filterlib.Filter) -> Callable:
    """One optimisation step, ``(state, batch, tables, seed) -> (state, metrics)``, not
    compiled: ``_compile_step`` compiles it over the mesh, capsim.train.members vmaps it
    over the members of a pack. It differentiates the ``wrt`` parameters. ``tables``
    (``{}`` for none) are the device tables whose rows the batch indexes: gathered first
    (capsim.data.device_tables), so the loss sees the batch the host would have built.

    The loss's key is ``fold_in(key(seed), n)`` for the optimizer's count ``n`` of steps
    done, made inside the step: made on the host, it added 94-270 us to a step as short
    as a GPU's (bench/speed/step_levers.py, test sizes on CPU). The seed is an argument,
    not a constant, so runs of other seeds share the compiled program."""

    def train_step(
        state: nnx.State,
        batch: Mapping[str, jax.Array],
        tables: Mapping[str, jax.Array],
        seed: jax.Array,
    ):
        batch = gather_tables(tables, batch)
        model, optimizer = nnx.merge(graphdef, state)
        model.train()
        key = step_key(seed, optimizer.step[...])

        def loss_of(m: nnx.Module):
            return loss_fn(m, batch, key)

        grad_fn = nnx.value_and_grad(loss_of, argnums=nnx.DiffState(0, wrt), has_aux=True)
        (loss, metrics), grads = grad_fn(model)
        optimizer.update(model, grads)
        metrics = {"loss": loss, **metrics, "grad_norm": optax.tree.norm(grads)}
        return nnx.state((model, optimizer)), metrics

    return train_step


def _compile_step(
    graphdef: nnx.GraphDef, loss_fn: LossFn, mesh: jax.sharding.Mesh, wrt: nnx.filterlib.Filter
):
    """``make_train_step`` compiled over the mesh: the batch sharded, the state, the
    tables and the seed replicated, the state donated."""
    replicated = mesh_lib.replicated(mesh)
    return jax.jit(
        make_train_step(graphdef, loss_fn, wrt),
        in_shardings=(replicated, mesh_lib.data_sharding(mesh), replicated, replicated),
        out_shardings=(replicated, replicated),
        donate_argnums=0,
    )


def step_key(seed: int | jax.Array, steps_done: int | jax.Array) -> jax.Array:
    """The loss's key in the step after ``steps_done`` steps of a run seeded ``seed``."""
    return jax.random.fold_in(jax.random.key(seed), steps_done)


def seed_array(seed: int) -> np.ndarray:
    """``config.seed`` as the step takes it: an unsigned 32-bit number (ValueError if not one)."""
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"config.seed={seed}: a seed must be in [0, 2**32)")
    return np.uint32(seed)


def default_prefetch() -> int:
    """Batches put on the device ahead of the step: 1 on accelerators, 0 on CPU, where the
    host is the device (bench/RESULTS.md "Device prefetch on CPU": 1.06x, min 0.97, max 1.10;
    noise)."""
    return 0 if jax.default_backend() == "cpu" else 1


def placed_tables(
    config: ml_collections.ConfigDict, tables: Mapping[str, np.ndarray], mesh: jax.sharding.Mesh
) -> tuple[device_tables.InputPath, dict[str, jax.Array]]:
    """(the input path, the tables as the step takes them): the path chosen by
    ``config.device_tables`` and logged, the tables replicated over the mesh when they go to
    the device, ``{}`` otherwise. DeviceTablesError, before any step, when "on" cannot be."""
    local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    path = device_tables.choose_path(config.get("device_tables", "auto"), tables, local)
    path = device_tables.agreed(path, tables)
    device_tables.log_path(path)
    return path, mesh_lib.replicate(dict(tables), mesh) if path.on_device else {}


def evaluation_model(graphdef: nnx.GraphDef, local_state: nnx.State) -> nnx.Module:
    """The model of a train state on this process's devices, in eval mode."""
    model, _ = nnx.merge(graphdef, local_state)
    model.eval()
    return model


def device_batches(
    data_iter: grain.DatasetIterator, config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh
) -> Iterator[tuple[dict, dict, float]]:
    """(global batch, the iterator's state after it, seconds waited for it).

    A thread takes the batches from grain and places them on the devices, 1 +
    ``device_prefetch`` of them ahead, while the caller dispatches steps: the step's
    thread only waits for a batch that is not ready (on 2 CPU cores placing a VTFN
    batch in the step's thread was 7% of the loop, bench/RESULTS.md "Input wait").
    The batches, their order and the states are the iterator's, as without the
    thread. Close the generator before the iterator (the training loop does).
    """
    ready: queue.Queue = queue.Queue(maxsize=1 + config.get("device_prefetch", default_prefetch()))
    stop = threading.Event()

    def offer(item: object) -> None:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def produce() -> None:
        try:
            while not stop.is_set():
                offer((mesh_lib.global_batch(next(data_iter), mesh), data_iter.get_state()))
        except BaseException as error:  # StopIteration too: the consumer ends or re-raises
            offer(error)

    thread = threading.Thread(target=produce, name="capsim-device-batches", daemon=True)
    thread.start()
    try:
        while True:
            began = time.perf_counter()
            item = ready.get()
            if isinstance(item, StopIteration):
                return
            if isinstance(item, BaseException):
                raise item
            batch, state = item
            yield batch, state, time.perf_counter() - began
    finally:
        stop.set()
        thread.join()


class Trainer:
    """Owns the optimizer, the train state with its shardings and the compiled step.

    ``Trainer(config, model, loss_fn)`` is enough for one step (``step``, the
    benches); ``fit`` adds the loop. Config keys: seed, batch_size, num_steps,
    log_every, checkpoint_every, optimizer.* (``optimizer.frozen``: see
    ``trainable``), early_stopping.{metric, mode, patience}, and optionally
    profile_steps ("A:B"), device_prefetch (batches ahead; ``default_prefetch``),
    device_tables ("auto", "on" or "off": where the rows of ``tables`` are gathered,
    capsim.data.device_tables) and start_over (when no checkpoint is usable, move the
    old run aside and train from 0).

    ``tables`` are the model's ``Batches.tables``: with ``tables_on_device`` they are
    placed here once, replicated, and the step gathers their rows, so the dataset must
    be ``batches.dataset(config, trainer.tables_on_device)``.
    """

    def __init__(
        self,
        config: ml_collections.ConfigDict,
        model: nnx.Module,
        loss_fn: LossFn,
        mesh: jax.sharding.Mesh | None = None,
        tables: Mapping[str, np.ndarray] | None = None,
    ):
        self.config = config
        self.model = model
        self.mesh = mesh or mesh_lib.make_data_mesh()
        mesh_lib.local_batch_size(config.batch_size)  # validates divisibility early
        wrt = trainable(config)
        self.optimizer = nnx.Optimizer(model, make_optimizer(config), wrt=wrt)
        self.graphdef, _ = nnx.split((model, self.optimizer))
        self.seed = mesh_lib.replicate(seed_array(config.seed), self.mesh)
        self.place_objects(self.model, self.optimizer)
        # after the state, so the free memory it sees is what is left beside it
        self.input_path, self.tables = placed_tables(config, tables or {}, self.mesh)
        self.train_step = _compile_step(self.graphdef, loss_fn, self.mesh, wrt)

    @property
    def tables_on_device(self) -> bool:
        return self.input_path.on_device

    def place_objects(self, model: nnx.Module, optimizer: nnx.Optimizer) -> None:
        """The step's state taken from ``model`` and ``optimizer`` (this trainer's own, or
        objects a checkpoint was restored into), replicated over the mesh."""
        self.state = mesh_lib.replicate(nnx.state((model, optimizer)), self.mesh)

    def train_objects(self) -> tuple[nnx.Module, nnx.Optimizer]:
        """The live model and optimizer holding the train state: what a checkpoint saves,
        or restores into (then ``place_objects``)."""
        nnx.update((self.model, self.optimizer), self.state)
        return self.model, self.optimizer

    def keep_trained(self) -> None:
        """The trained state (this process's copy) into the live model and optimizer, the
        model in eval mode: what ``fit`` leaves behind."""
        nnx.update((self.model, self.optimizer), mesh_lib.to_local(self.state))
        self.model.eval()

    def global_batch(self, local: Mapping[str, np.ndarray]) -> dict[str, jax.Array]:
        return mesh_lib.global_batch(local, self.mesh)

    def step(self, batch: Mapping[str, jax.Array]) -> dict[str, jax.Array]:
        """Trains one step on a global batch (``global_batch``); its key is ``step_key``
        of the steps done, so a resumed run draws the keys an unbroken one would."""
        self.state, metrics = self.train_step(self.state, batch, self.tables, self.seed)
        return metrics

    def host_metrics(self, metrics: Mapping[str, jax.Array]) -> dict[str, float]:
        """A step's metrics as Python floats (this process's copy)."""
        return {k: float(v) for k, v in mesh_lib.to_local(metrics).items()}

    def local_model(self) -> nnx.Module:
        """A copy of the model on this process's devices only, for host-side evaluation."""
        return evaluation_model(self.graphdef, mesh_lib.to_local(self.state))

    def device_batches(
        self, data_iter: grain.DatasetIterator
    ) -> Iterator[tuple[dict, dict, float]]:
        """``device_batches`` of this trainer's mesh and config."""
        return device_batches(data_iter, self.config, self.mesh)

    def fit(
        self,
        workdir: str | Path,
        train_data: grain.IterDataset,
        evaluate: PeriodicEval | None = None,
    ) -> TrainResult:
        """Trains the model in place, resuming from ``workdir/checkpoints`` when present.

        With ``evaluate``, every evaluation is saved as a checkpoint ranked by
        ``early_stopping.metric``; orbax keeps the best one, and training stops
        after ``patience`` evaluations without a gain (0 never stops).
        """
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        with hold_workdir(workdir):
            return Run(self, workdir, train_data, evaluate).loop()
