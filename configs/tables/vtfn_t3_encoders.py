"""VTFN Tables 1 and 3: the text encoder (BOW, RNN-GRU, RNN-LSTM, CNN), Pearson loss.

    python -m launch.sweep --config=configs/tables/vtfn_t3_encoders.py --workdir=runs/vtfn_t3 --pack=5
    python -m launch.sweep --config=configs/tables/vtfn_t3_encoders.py:scale=paper,features=FOLDER \\
        --workdir=runs/vtfn_t3_paper --cluster=slurm --gpus_per_task=1

Each row is its configs/coco_*.py run (vtfn_jax.config_lib.ENCODERS, with the encoder's own
dim and learning rate, ENCODER_NUMBERS), trained with ``seeds`` seeds (5). The paper's
Table 3 has two BOW rows, the sum and the mean of the word vectors; its BOW vector is
normalised (section 3.1.1) and every evaluation is a cosine, so a vector's scale cancels
and the two are one model: trained here with the same seed they give the same run, every
metric equal (tests/test_paper_tables.py). The table trains it once, as ``bow``.
Arguments: ``scale`` (here, paper: vtfn_jax.config_lib.TABLE_SCALES), ``seeds``, ``rows``
(``+``-joined, default all), the recipe's numbers and vtfn_jax.config_lib.OPTIONS.
"""

import ml_collections

from launch.paper_table import Claim, Table, table_grid
from vtfn_jax import config_lib as vtfn_common

TRAIN_MODULE = "vtfn_jax.train"
# row -> the encoder it trains (vtfn_jax.config_lib.ENCODERS)
ENCODERS = {"bow": "bow_sum", "gru": "gru", "lstm": "lstm", "cnn": "cnn"}
LABELS = {
    "bow": "BOW (sum or mean: one model)",
    "gru": "RNN-GRU",
    "lstm": "RNN-LSTM",
    "cnn": "CNN",
}
RNN = ("gru", "lstm")
METRICS = vtfn_common.TABLE_METRICS
TABLE = Table(
    title="VTFN Tables 1 and 3: the text encoder, Pearson x 100",
    rows=tuple(ENCODERS),
    labels=LABELS,
    measures=vtfn_common.TABLE_MEASURES,
    averages=vtfn_common.TABLE_AVERAGES,
    scales=vtfn_common.TABLE_SCALE_NOTES,
    claims=(
        Claim(
            "BOW beats the RNN encoders on average", "bow", RNN, "average", "section 5.1, Table 3"
        ),
        Claim(
            "BOW beats the CNN encoder on average", "bow", "cnn", "average", "section 4.4, Table 1"
        ),
        Claim(
            "The RNN encoders beat BOW on COCO-Test (in domain)",
            RNN,
            "bow",
            "COCO-Test",
            "section 5.1, Table 3",
        ),
        Claim(
            "The CNN encoder beats BOW on COCO-Test (in domain)",
            "cnn",
            "bow",
            "COCO-Test",
            "section 4.4, Table 1",
        ),
    ),
)


def _parse(arg: str | None) -> ml_collections.ConfigDict:
    return vtfn_common.table_arg(arg, rows="")


def _row(arg: ml_collections.ConfigDict, row: str) -> ml_collections.ConfigDict:
    return vtfn_common.encoder_run(arg, ENCODERS[row])


get_config, get_sweep, parse_table_arg = table_grid(_parse, _row, ENCODERS)
