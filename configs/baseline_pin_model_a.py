"""PinModelA baseline: a GRU caption language model started from the image feature.

    python -m vtfn_jax.train --config=configs/baseline_pin_model_a.py:data_dir=/data,features=/data/inception --workdir=...

Evaluated on its text-only embedding (no image). See configs.vtfn_common.baseline_config.
"""

import ml_collections

from configs import vtfn_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return vtfn_common.baseline_config(arg, kind="pin_model_a", source="files")
