"""VTFN Table 4: the alignment loss of VTFN-BOW (covariance, Pearson, surrogate Kendall, rank).

    python -m launch.sweep --config=configs/tables/vtfn_t4_losses.py --workdir=runs/vtfn_t4
    python -m launch.sweep --config=configs/tables/vtfn_t4_losses.py:scale=paper,features=FOLDER \\
        --workdir=runs/vtfn_t4_paper --cluster=slurm --gpus_per_task=1

Each row is configs/coco_bow.py's run with another ``config.loss.name``; every row is
trained with ``seeds`` seeds (5). The sweep ends by writing ``table.md`` and ``table.json``
(launch.paper_table) with the claims below and their verdicts. Arguments: ``scale`` (here,
paper: vtfn_jax.config_lib.TABLE_SCALES), ``seeds``, ``rows`` (``+``-joined, default
all), the recipe's numbers and vtfn_jax.config_lib.OPTIONS.
"""

import ml_collections

from launch.paper_table import Claim, Table, table_grid
from vtfn_jax import config_lib as vtfn_common

TRAIN_MODULE = "vtfn_jax.train"
LOSSES = {
    "covariance": "Covariance",
    "pearson": "Pearson",
    "kendall": "Surrogate Kendall",
    "rank": "Rank",
}
METRICS = vtfn_common.TABLE_METRICS
TABLE = Table(
    title="VTFN Table 4: the loss (VTFN-BOW), Pearson x 100",
    rows=tuple(LOSSES),
    labels=LOSSES,
    measures=vtfn_common.TABLE_MEASURES,
    averages=vtfn_common.TABLE_AVERAGES,
    scales=vtfn_common.TABLE_SCALE_NOTES,
    claims=tuple(
        Claim(
            f"Pearson gives a higher average than {label}",
            "pearson",
            loss,
            "average",
            "section 5.2, Table 4",
        )
        for loss, label in LOSSES.items()
        if loss != "pearson"
    ),
)


def _parse(arg: str | None) -> ml_collections.ConfigDict:
    return vtfn_common.table_arg(arg, rows="")


def _row(arg: ml_collections.ConfigDict, loss: str) -> ml_collections.ConfigDict:
    job = ml_collections.ConfigDict({**arg.to_dict(), "loss": loss})
    return vtfn_common.encoder_run(job, "bow_sum")


get_config, get_sweep, parse_table_arg = table_grid(_parse, _row, LOSSES)
