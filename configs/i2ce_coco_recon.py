"""I2CE on COCO (+ Flickr8k train) captions: the paper's one branch: reconstruction only.

    python -m i2ce_jax.train --config=configs/i2ce_coco_recon.py:data_dir=/data --workdir=...

Arguments: see configs.i2ce_common.parse (sizes, epochs, λ2, glove, flickr8k, runlocal).
"""

import ml_collections

from configs import i2ce_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    # Data: COCO + Flickr8k train captions; dev AUC for early stopping, Flickr8k-Expert report.
    config, arg = i2ce_common.coco_run(arg, loss="none")
    # Model: GRU autoencoder, 300/512 by default, word vectors from N(0, 1).
    config.model = i2ce_common.autoencoder(arg)
    # Loss: reconstruction only, the paper's one-branch model.
    config.loss = i2ce_common.branch(arg.loss)
    return config
