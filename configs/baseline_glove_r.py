"""GloVe-average baseline, restricted (R) to the training captions' vocabulary.

    python -m vtfn_jax.train --config=configs/baseline_glove_r.py:data_dir=/data --workdir=...

Uses the offline glove.6B.50d package by default (``glove=`` a glove.*.txt path
for another file); add ``source=shapes_world`` for the embedded world. See
configs.vtfn_common.baseline_config.
"""

import ml_collections

from configs import vtfn_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return vtfn_common.baseline_config(arg, kind="glove_avg", source="files", restricted=True)
