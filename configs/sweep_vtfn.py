"""VTFN ablation grid: text encoder × loss × dataset (5 × 6 × 2 = 60 jobs).

    python -m launch.sweep --config=configs/sweep_vtfn.py --workdir=runs/vtfn_grid
    python -m launch.sweep --config=configs/sweep_vtfn.py:dataset=shapes_world,encoder=bow_sum+gru \\
        --workdir=runs/vtfn_shapes --jobs 2

Grid arguments choose a sub-grid; each takes one value or several joined by
``+``: ``encoder`` (bow_sum, bow_mean, gru, lstm, cnn), ``loss`` (pearson,
covariance, kendall, rank, margin, triplet, or any other capsim.losses name)
and ``dataset`` (shapes_world, files). Every other argument goes to
``vtfn_common.vtfn_config`` (data_dir, features, epochs, runlocal, ...) and applies
to all jobs. ``get_config`` returns the config of the grid's first job, so a
job started by ``launch.sweep`` (which narrows each grid argument to one value)
gets exactly the config ``vtfn_config`` builds for it.

Encoder and dataset are swept through the config argument (``arg.*`` keys)
because each sets several fields (dropout; evaluation tasks); the loss is a
plain ``config.loss.name`` override.
"""

import ml_collections

from configs import vtfn_common

ENCODERS = ("bow_sum", "bow_mean", "gru", "lstm", "cnn")
LOSSES = ("pearson", "covariance", "kendall", "rank", "margin", "triplet")
DATASETS = ("shapes_world", "files")
GRID_ARGS = ("encoder", "loss", "dataset")
VALUE_SEPARATOR = "+"


def _split_arg(arg: str | None) -> tuple[dict[str, tuple[str, ...]], str]:
    """The grid choices in ``arg`` and the remaining ``vtfn_config`` argument."""
    grid = {"encoder": ENCODERS, "loss": LOSSES, "dataset": DATASETS}
    rest = []
    for item in filter(None, (arg or "").split(",")):
        key, _, value = item.partition("=")
        if key in GRID_ARGS:
            if not value:
                raise ValueError(f"config argument {key!r} needs a value")
            grid[key] = tuple(value.split(VALUE_SEPARATOR))
        else:
            rest.append(item)
    return grid, ",".join(rest)


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    grid, rest = _split_arg(arg)
    return vtfn_common.vtfn_config(
        rest, encoder=grid["encoder"][0], source=grid["dataset"][0], loss=grid["loss"][0]
    )


def get_sweep(hyper, arg: str | None = None) -> list[dict]:
    grid, _ = _split_arg(arg)
    return hyper.product(
        [
            hyper.sweep("arg.dataset", grid["dataset"]),
            hyper.sweep("arg.encoder", grid["encoder"]),
            hyper.sweep("config.loss.name", grid["loss"]),
        ]
    )
