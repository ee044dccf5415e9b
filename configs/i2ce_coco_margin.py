"""I2CE on COCO (+ Flickr8k train) captions: the paper's two branches: reconstruction plus a margin loss (0.2) over
the other captions of the batch (``:reduction=max`` for the hardest negative).

    python -m i2ce_jax.train --config=configs/i2ce_coco_margin.py:data_dir=/data --workdir=...

Arguments: see configs.i2ce_common.parse (sizes, epochs, λ2, glove, flickr8k, runlocal).
"""

import ml_collections

from configs import i2ce_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    # Data: COCO + Flickr8k train captions; dev AUC for early stopping, Flickr8k-Expert report.
    config, arg = i2ce_common.coco_run(arg, loss="margin")
    # Model: GRU autoencoder, 300/512 by default, word vectors from N(0, 1).
    config.model = i2ce_common.autoencoder(arg)
    # Loss: the paper's margin branch (0.2, in-batch negatives); λ1 = 1, λ2 = 10.
    config.loss = i2ce_common.branch(arg.loss, arg.reduction, arg.weight)
    return config
