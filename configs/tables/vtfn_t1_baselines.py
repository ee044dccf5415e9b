"""VTFN Table 1: the VTFN models against the text-only baselines and PinModelA, trained on COCO.

    python -m launch.sweep --config=configs/tables/vtfn_t1_baselines.py --workdir=runs/vtfn_t1 --pack=5
    python -m launch.sweep --config=configs/tables/vtfn_t1_baselines.py:scale=paper,features=FOLDER \\
        --workdir=runs/vtfn_t1_paper --cluster=slurm --gpus_per_task=1

The VTFN rows are Table 3's encoders (BOW, RNN-GRU, CNN: vtfn_jax.config_lib.ENCODERS);
the baseline rows are their own files (configs/baseline_*.py, with their own numbers)
on the table's data, schedule and selection (vtfn_jax.config_lib.baseline_row):
PureTextRNN (a GRU caption language model), word2vec (skip-gram on the training
captions) and PinModelA (a GRU language model started from the image feature). Every
row is trained with ``seeds`` seeds (5). Table 3's BOW-against-RNN/CNN claims are
judged in configs/tables/vtfn_t3_encoders.py; this table judges the one of section 4.4:
every VTFN model beats the baselines. Arguments: ``scale`` (here, paper:
vtfn_jax.config_lib.TABLE_SCALES), ``seeds``, ``rows`` (``+``-joined, default all),
the recipe's numbers and vtfn_jax.config_lib.OPTIONS.
"""

import ml_collections

from configs import baseline_pin_model_a, baseline_pure_text_rnn, baseline_word2vec
from launch.paper_table import Claim, Table, table_grid
from vtfn_jax import config_lib as vtfn_common

TRAIN_MODULE = "vtfn_jax.train"
VTFN = {"bow": "bow_sum", "gru": "gru", "cnn": "cnn"}  # row -> encoder
BASELINES = {
    "pure_text_rnn": baseline_pure_text_rnn,
    "word2vec": baseline_word2vec,
    "pin_model_a": baseline_pin_model_a,
}
LABELS = {
    "bow": "VTFN-BOW",
    "gru": "VTFN-RNN (GRU)",
    "cnn": "VTFN-CNN",
    "pure_text_rnn": "PureTextRNN",
    "word2vec": "word2vec",
    "pin_model_a": "PinModelA",
}
ROWS = (*VTFN, *BASELINES)
METRICS = vtfn_common.TABLE_METRICS
TABLE = Table(
    title="VTFN Table 1: VTFN against the baselines, Pearson x 100",
    rows=ROWS,
    labels=LABELS,
    measures=vtfn_common.TABLE_MEASURES,
    averages=vtfn_common.TABLE_AVERAGES,
    scales=vtfn_common.TABLE_SCALE_NOTES,
    claims=tuple(
        Claim(
            f"{LABELS[model]} beats {LABELS[baseline]} on average",
            model,
            baseline,
            "average",
            "section 4.4, Table 1",
        )
        for model in VTFN
        for baseline in BASELINES
    ),
)


def _parse(arg: str | None) -> ml_collections.ConfigDict:
    return vtfn_common.table_arg(arg, rows="")


def _row(arg: ml_collections.ConfigDict, row: str) -> ml_collections.ConfigDict:
    if row in VTFN:
        return vtfn_common.encoder_run(arg, VTFN[row])
    return vtfn_common.baseline_row(arg, BASELINES[row])


get_config, get_sweep, parse_table_arg = table_grid(_parse, _row, ROWS)
