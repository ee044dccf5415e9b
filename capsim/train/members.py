"""The members of a pack trained as one program: their states stacked, one vmapped step.

A grid's jobs that differ only in their seed and their optimizer's numbers can train
together (``launch.pack``). ``PackTrainer`` stacks the members' train states on a
leading member axis and calls the library's step (capsim.train.trainer.make_train_step)
vmapped over it: each member keeps its own initialisation, batches (its data order),
loss key, learning-rate schedule and weight decay (the optimizer's numbers live in its
state, capsim.train.optimizer), while the device tables are placed once for all.
Each member is otherwise a run of its own (``capsim.train.loop.Run`` over a
``PackMember``), stepped by the library's loop (capsim.train.loop.train_runs): its job
folder, metrics, evaluations, checkpoints and early stopping; a member that stops early
has its updates masked and keeps its best checkpoint. The stack is the one copy of the
members' state: their models hold only shapes until ``fit`` hands the trained state back.
``programs`` decides which members share one vmapped step.

``member_mode`` chooses vmapped or in turn (``python bench/throughput.py --only members``).
"""

from __future__ import annotations

import contextlib
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
from capsim.train.lock import hold_workdir
from capsim.train.loop import PeriodicEval, Run, TrainResult, train_runs
from capsim.train.memory_fit import (
    MEMORY_MARGIN,
    MemoryFitError,
    free_device_bytes,
    mib,
    program_bytes,
    tree_bytes,
)
from capsim.train.optimizer import make_optimizer, trainable
from capsim.train.trainer import (
    device_batches,
    evaluation_model,
    make_train_step,
    placed_tables,
    seed_array,
)

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


def programs(
    configs: Sequence[ml_collections.ConfigDict],
    models: Sequence[nnx.Module],
    tables: Sequence[Mapping[str, np.ndarray] | None] | None = None,
) -> list[list[int]]:
    """The members (indices) that one vmapped step can train, in groups: configs equal but
    for ``VMAPPED_KEYS``, models of the same structure and sizes, and equal device tables
    (shared, never copied; ``None``: not compared). Each member's data builds its
    vocabulary, so members of other seeds may differ in sizes or tables."""
    tables = tables or [None] * len(models)
    signatures = [_signature(nnx.state(model)) for model in models]

    def together(a: int, b: int) -> bool:
        return (
            signatures[a] == signatures[b]
            and _same_tables(tables[a], tables[b])
            and not vmapped_differences([configs[a], configs[b]])
        )

    groups: list[list[int]] = []
    for index in range(len(models)):
        group = next((g for g in groups if together(g[0], index)), None)
        if group is None:
            groups.append([index])
        else:
            group.append(index)
    return groups


def _same_tables(a: Mapping[str, np.ndarray] | None, b: Mapping[str, np.ndarray] | None) -> bool:
    a, b = a or {}, b or {}
    return a.keys() == b.keys() and all(
        a[k] is b[k] or (np.shape(a[k]) == np.shape(b[k]) and np.array_equal(a[k], b[k])) for k in a
    )


def _signature(state: nnx.State) -> str:
    """The state's structure with each leaf's shape and dtype."""
    return str(jax.tree.map(lambda x: (np.shape(x), str(x.dtype)), state))


def _stacked(
    configs: Sequence[ml_collections.ConfigDict],
    models: Sequence[nnx.Module],
    wrt: nnx.filterlib.Filter,
) -> tuple[nnx.GraphDef, nnx.State]:
    """(the graph of a member's model and optimizer, their states stacked on a leading
    member axis). The stack is the one copy: each model is left holding only shapes, and
    the optimizers are dropped."""
    split = [
        nnx.split((model, nnx.Optimizer(model, make_optimizer(config), wrt=wrt)))
        for config, model in zip(configs, models, strict=True)
    ]
    stack = jax.tree.map(lambda *leaves: jnp.stack(leaves), *[state for _, state in split])
    for model in models:
        nnx.update(model, jax.tree.map(_shape, nnx.state(model)))
    return split[0][0], stack


class PackTrainer:
    """K members' train states stacked and trained by one vmapped, compiled step.

    ``configs``: one per member; ``models``: each member's, initialised from its own seed;
    they must make one program (``programs``; ValueError naming what differs otherwise).
    The models' arrays move into the stack: until ``fit`` hands the trained state back
    they hold only shapes. The device tables (one copy, shared), the input path and the
    device batches are placed as a ``Trainer`` places them (capsim.train.trainer).
    """

    def __init__(
        self,
        configs: Sequence[ml_collections.ConfigDict],
        models: Sequence[nnx.Module],
        loss_fn: LossFn,
        mesh: jax.sharding.Mesh | None = None,
        tables: Mapping[str, np.ndarray] | None = None,
    ):
        if len(programs(configs, models)) > 1:
            differences = vmapped_differences(configs) or ["the models' structure or sizes"]
            raise ValueError(
                "vmapped members may differ only in " + ", ".join(VMAPPED_KEYS) + "; these "
                "differ: " + "; ".join(differences)
            )
        self.config = configs[0]
        self.mesh = mesh or mesh_lib.make_data_mesh()
        mesh_lib.local_batch_size(self.config.batch_size)
        wrt = trainable(self.config)
        self.graphdef, stack = _stacked(configs, models, wrt)
        self.state = mesh_lib.replicate(stack, self.mesh)
        self.members = [
            PackMember(self, index, config, model)
            for index, (config, model) in enumerate(zip(configs, models, strict=True))
        ]
        self.seeds = mesh_lib.replicate(np.array([seed_array(c.seed) for c in configs]), self.mesh)
        # after the state, so the free memory it sees is what is left beside it
        self.input_path, self.tables = placed_tables(self.config, tables or {}, self.mesh)
        self.train_step = _compile_pack_step(self.graphdef, loss_fn, self.mesh, wrt)
        self._host_metrics: tuple[Mapping, list[dict[str, float]]] | None = None
        self._masks: dict[tuple[bool, ...], jax.Array] = {}
        self._compiled: jax.stages.Compiled | None = None

    @property
    def tables_on_device(self) -> bool:
        return self.input_path.on_device

    def device_batches(self, data_iter: grain.DatasetIterator):
        """capsim.train.trainer.device_batches of the pack's mesh and config."""
        return device_batches(data_iter, self.config, self.mesh)

    def place_member(self, index: int, state: nnx.State) -> None:
        """Member ``index``'s row of the stack set to ``state`` (a checkpoint restored)."""
        self.state = _with_member(self.state, index, mesh_lib.replicate(state, self.mesh))

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
        member k prints: its progress lines, evaluations and warnings. Before the first
        step, ``check_memory``: members that do not fit get their state back in their
        models and nothing is saved."""
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

            def step(batches: list[dict], active: np.ndarray) -> dict:
                if self._compiled is None:
                    try:
                        self.check_memory(batches)
                    except MemoryFitError:
                        for run in runs:
                            run.close()
                            run.trainer.keep_trained()
                        raise
                return self.step(batches, active)

            return train_runs(runs, step, output)


class PackMember:
    """Member ``index`` of a PackTrainer as ``Run`` sees a trainer: its own config and
    model, its row of the stacked state, the pack's tables, mesh and batches."""

    def __init__(
        self, pack: PackTrainer, index: int, config: ml_collections.ConfigDict, model: nnx.Module
    ):
        self.pack, self.index, self.config, self.model = pack, index, config, model

    @property
    def input_path(self):
        return self.pack.input_path

    def device_batches(self, data_iter: grain.DatasetIterator):
        return self.pack.device_batches(data_iter)

    def host_metrics(self, metrics: Mapping[str, jax.Array]) -> dict[str, float]:
        return self.pack.member_host_metrics(metrics, self.index)

    def _local_state(self) -> nnx.State:
        """This member's row, cut from this process's copy of the stack: slicing the global
        array would be a program every process must run."""
        local = jax.tree.map(lambda x: x.addressable_data(0), self.pack.state)
        return _member_slice(local, self.index)

    def train_objects(self) -> tuple[nnx.Module, nnx.Optimizer]:
        """A model and optimizer holding this member's state (placed on the mesh again),
        made for a checkpoint to save or restore into, then dropped."""
        state = mesh_lib.replicate(self._local_state(), self.pack.mesh)
        return nnx.merge(self.pack.graphdef, state)

    def place_objects(self, model: nnx.Module, optimizer: nnx.Optimizer) -> None:
        self.pack.place_member(self.index, nnx.state((model, optimizer)))

    def keep_trained(self) -> None:
        """The member's trained state (this process's copy) into its model, in eval mode."""
        nnx.update(self.model, nnx.state(self.local_model()))
        self.model.eval()

    def local_model(self) -> nnx.Module:
        return evaluation_model(self.pack.graphdef, self._local_state())


def _shape(x: Any) -> Any:
    """An array's shape and dtype, in its place (what a model holds while a pack trains it)."""
    return jax.ShapeDtypeStruct(x.shape, x.dtype) if isinstance(x, jax.Array) else x


@jax.jit
def _member_slice(tree: Any, index: jax.Array) -> Any:
    """Row ``index`` of every leaf: one compiled call (leaf by leaf, 8 members' saves and
    evaluations spent 1.7 s in eager slicing on the demo grid)."""
    return jax.tree.map(lambda x: x[index], tree)


@jax.jit(donate_argnums=0)
def _with_member(stack: Any, index: int, state: Any) -> Any:
    """``stack`` with row ``index`` of every leaf set to ``state``'s (the stack donated)."""
    return jax.tree.map(lambda rows, row: rows.at[index].set(row), stack, state)


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
