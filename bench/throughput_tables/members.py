"""Members of a grid trained together: one vmapped step against the compiled step in turn.

A pack of K members, each with its own state, seed and batch, can run as one compiled
program (``capsim.train.members.PackTrainer.step``: the library's step vmapped over
stacked states and batches, with its mask for stopped members: one call a step for
all) or as the library's compiled step called for each member in turn. Which pays
depends on the backend and the model, so it is measured, never assumed:
``python bench/throughput.py --only members`` writes bench/results/members.json, a row
per model, size and member count with both modes' examples/s, and the accelerator
check runs the same rows on a GPU.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from bench.cases.catalogue import CASES, PAPER, TOY, CaseSizes
from bench.cases.placed import placed_batch
from capsim.config_lib import IN_TURN
from capsim.tables import format_cells
from capsim.train import Trainer
from capsim.train.members import PackTrainer
from capsim.train.memory_fit import MemoryFitError, free_device_bytes, mib, tree_bytes

MEMBER_COUNTS = (1, 8, 32)
BATCH = 128
SIZES = {"demo": TOY, "paper": PAPER}
MIN_SECONDS = 0.5  # each timed side runs at least this long (and at least 2 steps)


def _timed(step: Callable[[], object], min_seconds: float) -> float:
    """Seconds a call of ``step`` takes, over enough calls to last ``min_seconds``."""
    jax.block_until_ready(step())  # compiled and warm
    calls, began = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - began < min_seconds:
        jax.block_until_ready(step())
        calls += 1
    return (time.perf_counter() - began) / calls


def member_row(
    name: str, size: str, sizes: CaseSizes, members: int, rounds: int, min_seconds: float
) -> dict:
    """Examples/s of ``members`` members as one vmapped step and as the step in turn."""
    case = CASES[name](sizes, "float32", BATCH)
    trainer = Trainer(case.config, case.model, case.loss_fn)
    batches = [placed_batch(trainer, case.batches[k % len(case.batches)]) for k in range(members)]
    states = [jax.tree.map(jnp.copy, trainer.state) for _ in range(members)]

    def in_turn() -> object:
        for k in range(members):
            states[k], metrics = trainer.train_step(
                states[k], batches[k], trainer.tables, trainer.seed
            )
        return states, metrics

    # The pack holds each member's objects, their stack and (placing it) one more copy,
    # beside the in-turn side's states: more than the device has free is no row to time.
    copies = 4 * members * tree_bytes(trainer.state)
    free = free_device_bytes(trainer.mesh.devices.flat[0])
    if free is not None and copies > free:
        error = MemoryFitError(f"{members} members' states: {mib(copies)}, {mib(free)} free", 0)
        return _in_turn_only(name, size, case.sizes, members, rounds, min_seconds, in_turn, error)
    configs = [case.config.copy_and_resolve_references() for _ in range(members)]
    for seed, config in enumerate(configs):
        config.seed = seed
    pack = PackTrainer(configs, [nnx.clone(case.model) for _ in range(members)], case.loss_fn)
    active = np.ones(members, bool)

    def together() -> object:
        return pack.step(batches, active)

    try:
        pack.check_memory(batches)  # as a pack does before its first step
    except MemoryFitError as error:
        return _in_turn_only(name, size, case.sizes, members, rounds, min_seconds, in_turn, error)

    seconds: dict[str, list[float]] = {"vmapped": [], IN_TURN: []}
    for index in range(rounds):
        order = [("vmapped", together), (IN_TURN, in_turn)]
        for mode, run in order if index % 2 == 0 else order[::-1]:
            seconds[mode].append(_timed(run, min_seconds))
    examples = members * BATCH
    vmapped_rate = examples / statistics.median(seconds["vmapped"])
    in_turn_rate = examples / statistics.median(seconds[IN_TURN])
    return {
        "name": f"{name.removesuffix('-paper-scale')}, {size} sizes",
        "members": members,
        "mode": "vmapped" if vmapped_rate > in_turn_rate else IN_TURN,
        "packed_examples_per_second": vmapped_rate,
        "sequential_examples_per_second": in_turn_rate,
        "vmapped_over_in_turn": vmapped_rate / in_turn_rate,
        "backend": jax.default_backend(),
        "sizes": case.sizes,
    }


def _in_turn_only(
    name: str,
    size: str,
    sizes: str,
    members: int,
    rounds: int,
    min_seconds: float,
    in_turn: Callable[[], object],
    error: MemoryFitError,
) -> dict:
    """The row of members whose vmapped program does not fit: in turn only, and why."""
    seconds = statistics.median(_timed(in_turn, min_seconds) for _ in range(rounds))
    return {
        "name": f"{name.removesuffix('-paper-scale')}, {size} sizes",
        "members": members,
        "mode": IN_TURN,
        "packed_examples_per_second": None,
        "sequential_examples_per_second": members * BATCH / seconds,
        "vmapped_over_in_turn": None,
        "vmapped_does_not_fit": str(error),
        "backend": jax.default_backend(),
        "sizes": sizes,
    }


def member_rows(
    counts: Sequence[int] = MEMBER_COUNTS,
    rounds: int = 3,
    min_seconds: float = MIN_SECONDS,
    sizes: Sequence[str] = tuple(SIZES),
    report: Callable[[dict], None] = print,
) -> list[dict]:
    """Every model of CASES at each of ``sizes`` and member count, batch 128."""
    rows = []
    for size in sizes:
        for name in CASES:
            for members in counts:
                row = member_row(name, size, SIZES[size], members, rounds, min_seconds)
                report(row)
                rows.append(row)
    return rows


def members_table(rows: Sequence[dict]) -> str:
    """The rows as a table: both modes, the faster one (the default would take it), and
    its examples/s over one member's (the pack's gain on this machine)."""
    single = {r["name"]: r["sequential_examples_per_second"] for r in rows if r["members"] == 1}
    columns = ["model", "members", "vmapped ex/s", "in turn ex/s", "vmapped / in turn"]
    columns += ["faster", "faster / one member"]
    cells = []
    for row in rows:
        vmapped = row["packed_examples_per_second"]
        best = max(vmapped or 0.0, row["sequential_examples_per_second"])
        cells.append(
            [
                row["name"],
                row["members"],
                "does not fit" if vmapped is None else f"{vmapped:.0f}",
                f"{row['sequential_examples_per_second']:.0f}",
                "" if vmapped is None else f"{row['vmapped_over_in_turn']:.2f}",
                row["mode"],
                f"{best / single[row['name']]:.2f}" if row["name"] in single else "",
            ]
        )
    return format_cells(columns, cells)
