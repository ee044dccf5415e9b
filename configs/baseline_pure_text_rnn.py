"""PureTextRNN baseline: a GRU language model on the training captions.

    python -m vtfn_jax.train --config=configs/baseline_pure_text_rnn.py:data_dir=/data --workdir=...

See configs.vtfn_common.baseline_config.
"""

import ml_collections

from configs import vtfn_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return vtfn_common.baseline_config(arg, kind="pure_text_rnn", source="files")
