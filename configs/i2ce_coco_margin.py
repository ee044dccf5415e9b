"""I2CE, loss branch "margin", on COCO (+ Flickr8k train) captions from a data_dir.

    python -m i2ce_jax.train --config=configs/i2ce_coco_margin.py:data_dir=/data --workdir=...

See configs.common.i2ce_files_config for the data layout and arguments.
"""

import ml_collections

from configs import common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return common.i2ce_files_config(arg, loss="margin")
