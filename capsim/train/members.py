"""The members of a pack trained as one program: their states stacked, one vmapped step.

A grid's jobs that differ only in their seed and their optimizer's numbers can train
together (``launch.pack``). ``PackTrainer`` stacks the members' train states on a
leading member axis and calls the library's step (capsim.train.trainer.make_train_step)
vmapped over it: each member keeps its own initialisation, batches (its data order),
loss key, learning-rate schedule and weight decay (the optimizer's numbers live in its
state, capsim.train.optimizer), while the device tables are placed once for all.
Each member is otherwise a run of its own (``capsim.train.loop.Run`` over a
``PackMember``): its job folder, metrics, evaluations, checkpoints and early stopping;
a member that stops early has its updates masked and keeps its best checkpoint.

``member_mode`` chooses vmapped or in turn (``python bench/throughput.py --only members``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import grain
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from flax import nnx

from capsim import mesh as mesh_lib
from capsim.config_lib import HYPERPARAMETERS, IN_TURN, VMAPPED
from capsim.task import LossFn
from capsim.train.faults import Preemption, exit_on_failure
from capsim.train.lock import hold_workdir
from capsim.train.loop import PeriodicEval, Run, TrainResult
from capsim.train.memory_fit import (
    MEMORY_MARGIN,
    MemoryFitError,
    free_device_bytes,
    mib,
    program_bytes,
    tree_bytes,
)
from capsim.train.optimizer import make_optimizer, trainable
from capsim.train.trainer import Trainer, make_train_step, seed_array

# Config keys the members of one vmapped program may differ in: the step's arguments (seed,
# the optimizer's numbers) and the loop's own keys. The rest are constants of the compiled
# step (the loss's scalars and dropout rates included): launch.grid's member keys.
VMAPPED_KEYS = (
    "seed",
    *(f"optimizer.{name}" for name in HYPERPARAMETERS),
    "num_steps",
    "num_epochs",
    "log_every",
    "checkpoint_every",
    "early_stopping.patience",
    "start_over",
)
# Parameters up to which a model without a scan trains faster vmapped on CPU
# (bench/results/members.json: VTFN-BOW at demo sizes, 26k parameters, 1.92x at 8
# members; at paper sizes, 3.3M, 0.64x; every scan model 0.50-0.88x but VTFN-GRU's
# demo 1.17x at 8).
CPU_VMAPPED_MAX_PARAMETERS = 1_000_000


def member_mode(model: nnx.Module, backend: str | None = None) -> str:
    """How a pack's members run by default on ``backend`` (default: JAX's): "vmapped" on
    accelerators, where one member leaves most of the chip idle; on CPU only for a small
    model without a ``lax.scan`` (bench/RESULTS.md, "Members of a grid")."""
    backend = backend or jax.default_backend()
    if backend != "cpu":
        return "vmapped"
    parameters = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    small = parameters <= CPU_VMAPPED_MAX_PARAMETERS
    return VMAPPED if small and not _has_scan(model) else IN_TURN


def _has_scan(model: nnx.Module) -> bool:
    """Whether the model holds a recurrent cell (its encoders run it under lax.scan)."""
    return any(isinstance(node, nnx.RNNCellBase) for _, node in nnx.iter_graph(model))


def vmapped_differences(configs: Sequence[ml_collections.ConfigDict]) -> list[str]:
    """The keys outside ``VMAPPED_KEYS`` whose values differ between the configs, as
    ``"key: a (member 1), b (member 3)"``."""
    flat = [_flatten(c.to_dict()) for c in configs]
    keys = sorted(set().union(*flat) - set(VMAPPED_KEYS))
    differences = []
    for key in keys:
        values = [repr(f.get(key, "<absent>")) for f in flat]
        if len(set(values)) > 1:
            shown = ", ".join(f"{v} (member {i + 1})" for i, v in enumerate(values))
            differences.append(f"{key}: {shown}")
    return differences


def _flatten(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    flat = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def shared_programs(
    models: Sequence[nnx.Module], tables: Sequence[Mapping[str, np.ndarray] | None]
) -> list[list[int]]:
    """The members (indices) that one vmapped step can train: models of the same structure
    and sizes, and equal device tables (shared, never copied). Each member's data builds
    its vocabulary, so members of other seeds may differ there."""
    groups: list[list[int]] = []
    keys: list[str] = []
    for index, model in enumerate(models):
        key = _signature(nnx.state(model))
        for group, group_key in zip(groups, keys, strict=True):
            if key == group_key and _same_tables(tables[group[0]], tables[index]):
                group.append(index)
                break
        else:
            groups.append([index])
            keys.append(key)
    return groups


def _same_tables(a: Mapping[str, np.ndarray] | None, b: Mapping[str, np.ndarray] | None) -> bool:
    a, b = a or {}, b or {}
    return a.keys() == b.keys() and all(
        a[k] is b[k] or (np.shape(a[k]) == np.shape(b[k]) and np.array_equal(a[k], b[k])) for k in a
    )


def _signature(state: nnx.State) -> str:
    """The state's structure with each leaf's shape and dtype."""
    return str(jax.tree.map(lambda x: (np.shape(x), str(x.dtype)), state))


def _stack(trees: Sequence[Any]) -> Any:
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)  # PRNG keys too


class PackTrainer(Trainer):
    """K members' train states stacked and trained by one vmapped, compiled step.

    ``configs``: one per member, equal but for ``VMAPPED_KEYS`` (ValueError naming the
    key otherwise); ``models``: each member's, initialised from its own seed, all of one
    structure. The device tables (one copy, shared) and the mesh are the Trainer's.
    """

    def __init__(
        self,
        configs: Sequence[ml_collections.ConfigDict],
        models: Sequence[nnx.Module],
        loss_fn: LossFn,
        mesh: jax.sharding.Mesh | None = None,
        tables: Mapping[str, np.ndarray] | None = None,
    ):
        if differences := vmapped_differences(configs):
            raise ValueError(
                "vmapped members may differ only in " + ", ".join(VMAPPED_KEYS) + "; these "
                "differ: " + "; ".join(differences)
            )
        self.config = configs[0]
        self.mesh = mesh or mesh_lib.make_data_mesh()
        mesh_lib.local_batch_size(self.config.batch_size)
        wrt = trainable(self.config)
        self.members = [
            PackMember(self, index, config, model, wrt)
            for index, (config, model) in enumerate(zip(configs, models, strict=True))
        ]
        self.model, self.optimizer = self.members[0].model, self.members[0].optimizer
        self.graphdef = self.members[0].graphdef
        if len({_signature(m.objects_state()) for m in self.members}) > 1:
            raise ValueError("the members' models differ in structure or sizes; pack them apart")
        self.state = mesh_lib.replicate(
            _stack([m.objects_state() for m in self.members]), self.mesh
        )
        self.seeds = mesh_lib.replicate(np.array([seed_array(c.seed) for c in configs]), self.mesh)
        self.place_tables(tables or {})
        self.train_step = _compile_pack_step(self.graphdef, loss_fn, self.mesh, wrt)
        self._host_metrics: tuple[Mapping, list[dict[str, float]]] | None = None
        self._masks: dict[tuple[bool, ...], jax.Array] = {}
        self._compiled: jax.stages.Compiled | None = None

    def step(self, batches: Sequence[Mapping[str, jax.Array]], active: np.ndarray) -> dict:
        """One step of every member on its global batch; ``active[k]`` False keeps member
        k's state as it was (a stopped member: its batch may be any member's).
        Returns the metrics stacked over members."""
        key = tuple(bool(a) for a in active)
        if key not in self._masks:
            self._masks[key] = mesh_lib.replicate(np.array(key), self.mesh)
        step = self._compiled or self.train_step
        self.state, metrics = step(
            self.state, tuple(batches), self.tables, self.seeds, self._masks[key]
        )
        return metrics

    def member_host_metrics(self, metrics: Mapping[str, jax.Array], index: int) -> dict:
        """Member ``index``'s row of a step's stacked metrics, as floats (copied once a step)."""
        if self._host_metrics is None or self._host_metrics[0] is not metrics:
            local = {k: np.asarray(v) for k, v in mesh_lib.to_local(metrics).items()}
            rows = [{k: float(v[i]) for k, v in local.items()} for i in range(len(self.members))]
            self._host_metrics = (metrics, rows)  # holds the step's metrics: no id reused
        return self._host_metrics[1][index]

    def check_memory(self, batches: Sequence[Mapping[str, jax.Array]]) -> int:
        """Compiles the step and stops before training, with MemoryFitError naming the
        sizes, when what it allocates beside its arguments (XLA's memory analysis) is more
        than the device has free; returns the bytes the program holds while it runs."""
        mask = mesh_lib.replicate(np.ones(len(self.members), bool), self.mesh)
        compiled = self.train_step.lower(
            self.state, tuple(batches), self.tables, self.seeds, mask
        ).compile()
        arguments, allocated = program_bytes(compiled)
        device = next(d for d in self.mesh.devices.flat if d.process_index == jax.process_index())
        free = free_device_bytes(device)
        if free is not None and allocated * MEMORY_MARGIN > free:
            count, tables = len(self.members), tree_bytes(self.tables)
            per_member = max(1, int(arguments + allocated * MEMORY_MARGIN - tables) // count)
            fits = max(0, (free + arguments - tables) // per_member)
            raise MemoryFitError(
                f"{count} vmapped member(s) need {mib(arguments + allocated)} on {device} "
                f"(state {mib(tree_bytes(self.state))}, tables {mib(tables)}, batches, and "
                f"{mib(allocated)} of activations and temporaries, with a margin of "
                f"{MEMORY_MARGIN}x) but {mib(free)} is free "
                f"beside them: about {fits} would fit (launch.sweep --pack {max(fits, 1)}, or "
                "--pack auto)",
                fits=int(fits),
            )
        self._compiled = compiled
        return arguments + allocated

    def fit(
        self,
        workdirs: Sequence[str | Path],
        datasets: Sequence[grain.IterDataset],
        evaluates: Sequence[PeriodicEval | None],
        member_output: Callable[[int], contextlib.AbstractContextManager] | None = None,
    ) -> list[TrainResult]:
        """Trains every member in place, each resuming from its own workdir; returns each
        member's TrainResult. ``member_output(k)`` (optional) is entered around what
        member k prints: its progress lines, evaluations and warnings."""
        output = member_output or (lambda index: contextlib.nullcontext())
        workdirs = [Path(w) for w in workdirs]
        with contextlib.ExitStack() as stack:
            runs = []
            for member, workdir, data, evaluate in zip(
                self.members, workdirs, datasets, evaluates, strict=True
            ):
                workdir.mkdir(parents=True, exist_ok=True)
                stack.enter_context(hold_workdir(workdir))
                with output(member.index):
                    runs.append(Run(member, workdir, data, evaluate))
            self.state = mesh_lib.replicate(
                _stack([m.objects_state() for m in self.members]), self.mesh
            )  # the states the runs resumed
            return _PackLoop(self, runs, output).train()


class _PackLoop:
    """The runs of a PackTrainer's members, stepped together until each is done."""

    def __init__(self, pack: PackTrainer, runs: list[Run], output: Callable):
        self.pack, self.runs, self.output = pack, runs, output

    def train(self) -> list[TrainResult]:
        pack, runs = self.pack, self.runs
        for index, run in enumerate(runs):
            with self.output(index):
                run.begin()
        feeds = [pack.device_batches(run.data_iter) for run in runs]
        preemption = Preemption(runs[0].checkpoints.reached_preemption)
        steps = 0
        try:
            with exit_on_failure(lambda: ", ".join(r.describe_checkpoint() for r in runs)):
                while any(run.active() for run in runs):
                    active = np.array([run.active() for run in runs])
                    taken = [next(feeds[k]) if active[k] else None for k in range(len(runs))]
                    if steps == 0:
                        self._check_memory(self._batches(taken))
                    metrics = pack.step(self._batches(taken), active)
                    steps += 1
                    preempted = preemption.reached(steps)
                    for index in np.flatnonzero(active):
                        _, data_state, seconds = taken[index]
                        with self.output(index):
                            runs[index].after_step(metrics, data_state, seconds, preempted)
                    if preempted:
                        self._stop_preempted()
        finally:
            for feed in feeds:
                feed.close()
            preemption.close()
        results = []
        for index, run in enumerate(runs):
            with self.output(index):
                results.append(run.finish())
        return results

    def _check_memory(self, batches: list) -> None:
        """PackTrainer.check_memory; when the members do not fit, their runs are closed
        (nothing was trained or saved) before the error goes up."""
        try:
            self.pack.check_memory(batches)
        except MemoryFitError:
            for run in self.runs:
                run.writer.close()
                run.checkpoints.close()
            raise

    @staticmethod
    def _batches(taken: list) -> list:
        """Each member's batch; a stopped member's slot gets an active member's (masked)."""
        spare = next(item[0] for item in taken if item is not None)
        return [spare if item is None else item[0] for item in taken]

    def _stop_preempted(self) -> None:
        for index, run in enumerate(self.runs):
            with self.output(index):
                run.stop_preempted()
        sys.exit(0)


class PackMember(Trainer):
    """Member ``index`` of a PackTrainer, as ``Run`` sees a trainer: its own config,
    model and optimizer, its slice of the stacked state, the pack's tables and mesh."""

    def __init__(
        self,
        pack: PackTrainer,
        index: int,
        config: ml_collections.ConfigDict,
        model: nnx.Module,
        wrt: nnx.filterlib.Filter,
    ):
        self.pack, self.index, self.config, self.model = pack, index, config, model
        self.mesh = pack.mesh
        self.optimizer = nnx.Optimizer(model, make_optimizer(config), wrt=wrt)
        self.graphdef, _ = nnx.split((model, self.optimizer))

    def objects_state(self) -> nnx.State:
        return nnx.state((self.model, self.optimizer))

    @property
    def tables(self) -> Mapping[str, jax.Array]:
        return self.pack.tables

    @property
    def input_path(self):
        return self.pack.input_path

    @property
    def state(self) -> nnx.State:
        """This member's slice of the stacked state, cut from this process's copy and placed
        again: slicing the global array would be a program every process must run."""
        local = jax.tree.map(lambda x: x.addressable_data(0), self.pack.state)
        return mesh_lib.replicate(_member_slice(local, self.index), self.mesh)

    def place_state(self) -> None:
        """Nothing to place yet: PackTrainer.fit stacks the states the runs resumed."""

    def host_metrics(self, metrics: Mapping[str, jax.Array]) -> dict[str, float]:
        return self.pack.member_host_metrics(metrics, self.index)


@jax.jit
def _member_slice(tree: Any, index: jax.Array) -> Any:
    """Row ``index`` of every leaf: one compiled call (leaf by leaf, 8 members' saves and
    evaluations spent 1.7 s in eager slicing on the demo grid)."""
    return jax.tree.map(lambda x: x[index], tree)


def _compile_pack_step(
    graphdef: nnx.GraphDef, loss_fn: LossFn, mesh: jax.sharding.Mesh, wrt: nnx.filterlib.Filter
):
    """The library's step vmapped over members: states, batches, seeds and the ``active``
    mask on the member axis, the tables shared; a masked member keeps its state."""
    step = make_train_step(graphdef, loss_fn, wrt)

    def member_step(state, batch, tables, seed, active):
        new_state, metrics = step(state, batch, tables, seed)
        kept = jax.tree.map(lambda new, old: jnp.where(active, new, old), new_state, state)
        return kept, metrics

    def pack_step(state, batches, tables, seeds, active):
        batch = jax.tree.map(lambda *rows: jnp.stack(rows), *batches)
        return jax.vmap(member_step, in_axes=(0, 0, None, 0, 0))(
            state, batch, tables, seeds, active
        )

    replicated = mesh_lib.replicated(mesh)
    return jax.jit(
        pack_step,
        in_shardings=(replicated, mesh_lib.data_sharding(mesh), replicated, replicated, replicated),
        out_shardings=(replicated, replicated),
        donate_argnums=0,
    )
