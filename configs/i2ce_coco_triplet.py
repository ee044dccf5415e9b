"""I2CE on COCO (+ Flickr8k train) captions: the paper's three branches: reconstruction plus a triplet
loss (anchor and a caption of the same image against a caption of another image).

    python -m i2ce_jax.train --config=configs/i2ce_coco_triplet.py:data_dir=/data --workdir=...

The numbers are the settled recipe (bench/RESULTS.md): 300/512, word vectors from
N(0, 1), up to 8 epochs with early stopping on held-out captions. Arguments: the
numbers below, and i2ce_jax.config_lib.OPTIONS (sources, glove, flickr8k,
reduction, weight, buckets, runlocal, ...).
"""

import ml_collections

from capsim import config_lib as common
from i2ce_jax import config_lib as i2ce_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    arg = common.parse_arg(
        arg,
        **i2ce_common.OPTIONS,
        loss="triplet",  # triplet with a second caption of the image; λ2 = 10
        embed=300,  # word vectors
        hidden=512,  # GRU state: the intrinsic vector
        init_std=1.0,  # word vectors from N(0, 1); 0: flax's N(0, 1/embed)
        lr=5e-4,  # Adam, constant
        decay=1.0,
        decay_steps=1000,
        l2=0.0,
        batch=128,
        epochs=8.0,  # with early stopping (patience 4) on the dev evaluation
        eval_every=200,  # dev same-image AUC, steps
    )
    # Data: COCO + Flickr8k train captions; dev AUC for early stopping, Flickr8k-Expert report.
    config = i2ce_common.run(arg)
    config.model = i2ce_common.autoencoder(arg)
    config.loss = i2ce_common.branch(arg.loss, arg.reduction, arg.weight, arg.contrast)
    return i2ce_common.finish(config, arg)
