"""VTFN with the gru text encoder on COCO captions plus frozen image features.

    python -m vtfn_jax.train --config=configs/coco_gru.py:data_dir=/data,features=/data/inception --workdir=...

With the default `features=coco_object_labels` it trains on COCO object labels
(an 80-d multi-hot stand-in, not CNN features). See configs.common.vtfn_config.
"""

import ml_collections

from configs import common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return common.vtfn_config(arg, encoder="gru", source="files")
