"""I2CE on COCO (+ Flickr8k train) captions: the paper's three branches: reconstruction plus a triplet loss (anchor and
a caption of the same image against a caption of another image).

    python -m i2ce_jax.train --config=configs/i2ce_coco_triplet.py:data_dir=/data --workdir=...

Arguments: see configs.i2ce_common.parse (sizes, epochs, λ2, glove, flickr8k, runlocal).
"""

import ml_collections

from configs import i2ce_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    # Data: COCO + Flickr8k train captions; dev AUC for early stopping, Flickr8k-Expert report.
    config, arg = i2ce_common.coco_run(arg, loss="triplet")
    # Model: GRU autoencoder, 300/512 by default, word vectors from N(0, 1).
    config.model = i2ce_common.autoencoder(arg)
    # Loss: the paper's triplet branch (same image vs another); λ1 = 1, λ2 = 10.
    config.loss = i2ce_common.branch(arg.loss, weight=arg.weight)
    return config
