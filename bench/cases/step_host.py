"""What the host adds to a short step (issue 48 §2): bench/speed/step_levers.py's host rows and
the accelerator check's.

- the loss's key: ``Trainer.step`` (the key made inside the compiled step,
  capsim.train.trainer.step_key) against the same step plus the ``jax.random.fold_in``
  on the host that made the key before;
- a batch's placement: capsim.mesh.global_batch (every array in one call) against a
  call per array, as before.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from bench.cases.catalogue import CASES, CaseSizes, i2ce_case
from bench.cases.placed import placed_batch, process_rows
from bench.harness import load_average, ratio_spread, ratio_summary, time_rounds
from capsim import mesh as mesh_lib
from capsim.tables import format_cells
from capsim.train import Trainer


# --------------------------------------------------------------------------- host key
def measure_host_key(
    scale: CaseSizes, model: str, batch: int, steps: int, rounds: int, dtype: str = "float32"
) -> dict:
    """``Trainer.step`` against itself plus a host ``jax.random.fold_in`` per step (the
    key as it was made before): the ratio is what making the key in the step gained."""
    case = CASES[model](scale, dtype, batch)
    trainer = Trainer(case.config, case.model, case.loss_fn)
    placed = placed_batch(trainer, case.batches[0])
    key = jax.random.key(case.config.seed)

    def loop(host_key: bool) -> Callable[[int], None]:
        def run(_: int) -> None:
            metrics = keys = None
            for step in range(steps):
                if host_key:
                    keys = jax.random.fold_in(key, step)
                metrics = trainer.step(placed)
            jax.block_until_ready((trainer.state, metrics, keys))

        return run

    runners = {"in step": loop(False), "on host": loop(True)}
    for run in runners.values():
        run(0)
    load = load_average()
    seconds = time_rounds(runners, rounds)
    in_step, on_host = (float(np.median(seconds[k])) / steps for k in runners)
    return {
        "model": model,
        "dtype": dtype,
        "batch": batch,
        "sizes": case.sizes,
        "step_us_key_in_step": in_step * 1e6,
        "step_us_key_on_host": on_host * 1e6,
        **ratio_summary(seconds["in step"], seconds["on host"]),
        "load_average": [load, load_average()],
    }


# --------------------------------------------------------------------------- placement
def placement_batches(scale: CaseSizes, batch: int) -> dict[str, dict[str, np.ndarray]]:
    """Host batches as the trainings build them: I2CE's, and VTFN-GRU's on each input path
    (capsim.data.device_tables: image rows on the device path, the features on the host's)."""
    i2ce = i2ce_case(scale, "float32", batch).batches[0]
    vtfn = CASES["VTFN-GRU"](scale, "float32", batch).batches[0]
    rows = {k: v for k, v in vtfn.items() if k != "features"}
    rows["features_rows"] = np.arange(batch, dtype=np.int32)
    return {
        "I2CE-paper-scale": i2ce,
        "VTFN-GRU, device tables": rows,
        "VTFN-GRU, host gather": vtfn,
    }


def measure_placement(scale: CaseSizes, batch: int, repeats: int, rounds: int) -> list[dict]:
    """capsim.mesh.global_batch (every array in one call) against one call per array, as
    it placed them before: microseconds a batch, and the gain."""
    mesh = mesh_lib.make_data_mesh()
    sharding = mesh_lib.data_sharding(mesh)
    rows = []
    for name, local in placement_batches(scale, batch).items():
        share = process_rows(local)

        def one_call(_: int, local=share) -> None:
            jax.block_until_ready([mesh_lib.global_batch(local, mesh) for _ in range(repeats)])

        def per_array(_: int, local=share) -> None:
            jax.block_until_ready(
                [
                    {
                        k: jax.make_array_from_process_local_data(sharding, v)
                        for k, v in local.items()
                    }
                    for _ in range(repeats)
                ]
            )

        runners = {"one call": one_call, "per array": per_array}
        for run in runners.values():
            run(0)
        load = load_average()
        seconds = time_rounds(runners, rounds)
        rows.append(
            {
                "batch_of": name,
                "batch": batch,
                "arrays": len(local),
                "megabytes": sum(v.nbytes for v in local.values()) / 1e6,
                "us_one_call": float(np.median(seconds["one call"])) / repeats * 1e6,
                "us_per_array": float(np.median(seconds["per array"])) / repeats * 1e6,
                **ratio_summary(seconds["one call"], seconds["per array"]),
                "load_average": [load, load_average()],
            }
        )
    return rows


def placement_table(rows: list[dict]) -> str:
    return format_cells(
        ["batch of", "batch", "arrays", "MB", "µs, one call", "µs, a call per array", "gain"],
        [
            [
                r["batch_of"],
                str(r["batch"]),
                str(r["arrays"]),
                f"{r['megabytes']:.2f}",
                f"{r['us_one_call']:,.0f}",
                f"{r['us_per_array']:,.0f}",
                ratio_spread(r),
            ]
            for r in rows
        ],
    )


def host_key_table(rows: list[dict]) -> str:
    return format_cells(
        ["model", "sizes", "µs/step, key in step", "µs/step, key on host", "gain (min-max)"],
        [
            [
                r["model"].removesuffix("-paper-scale"),  # the sizes say which
                r["sizes"],
                f"{r['step_us_key_in_step']:,.0f}",
                f"{r['step_us_key_on_host']:,.0f}",
                ratio_spread(r),
            ]
            for r in rows
        ],
    )
