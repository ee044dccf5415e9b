"""VTFN Table 6: sentence-level against word-level training (VTFN-BOW).

    python -m launch.sweep --config=configs/tables/vtfn_t6_levels.py --workdir=runs/vtfn_t6 --pack=5
    python -m launch.sweep --config=configs/tables/vtfn_t6_levels.py:scale=paper,features=FOLDER \\
        --workdir=runs/vtfn_t6_paper --cluster=slurm --gpus_per_task=1

Both rows are configs/coco_bow.py's run (vtfn_jax.config_lib.encoder_run). ``sentence``
trains each caption as one example, as VTFN does; ``word`` trains each word of a caption
as an example of its own for the caption's image (``level=word``:
vtfn_jax.data.words_as_captions), so the word vectors learn the image alone and a
sentence is their sum only at evaluation, the paper's section 5.4. Both see every
caption's words the same number of times (the same epochs); a word-level epoch has about
ten times the examples. Every row is trained with ``seeds`` seeds (5). Arguments:
``scale`` (here, paper: vtfn_jax.config_lib.TABLE_SCALES), ``seeds``, ``rows``
(``+``-joined, default all), the recipe's numbers and vtfn_jax.config_lib.OPTIONS.
"""

import ml_collections

from launch.paper_table import Claim, Table, table_grid
from vtfn_jax import config_lib as vtfn_common

TRAIN_MODULE = "vtfn_jax.train"
LEVELS = {
    "sentence": "Sentence level (VTFN-BOW)",
    "word": "Word level (BOW of words trained alone)",
}
METRICS = vtfn_common.TABLE_METRICS
TABLE = Table(
    title="VTFN Table 6: sentence-level against word-level training, Pearson x 100",
    rows=tuple(LEVELS),
    labels=LEVELS,
    measures=vtfn_common.TABLE_MEASURES,
    averages=vtfn_common.TABLE_AVERAGES,
    scales=vtfn_common.TABLE_SCALE_NOTES,
    claims=(
        Claim(
            "Sentence-level training beats word-level training on average",
            "sentence",
            "word",
            "average",
            "section 5.4, Table 6",
        ),
    ),
)


def _parse(arg: str | None) -> ml_collections.ConfigDict:
    return vtfn_common.table_arg(arg, rows="")


def _row(arg: ml_collections.ConfigDict, level: str) -> ml_collections.ConfigDict:
    job = ml_collections.ConfigDict({**arg.to_dict(), "level": level})
    return vtfn_common.encoder_run(job, "bow_sum")


get_config, get_sweep, parse_table_arg = table_grid(_parse, _row, LEVELS)
