"""VTFN with the gru text encoder on COCO captions plus frozen image features.

    python -m vtfn_jax.train --config=configs/coco_gru.py:data_dir=/data,features=/data/inception --workdir=...

With the default `features=coco_object_labels` it trains on COCO object labels
(an 80-d multi-hot stand-in, not CNN features).
Arguments: the numbers below, and vtfn_jax.config_lib.OPTIONS (data_dir, features,
captions, glove, pivot, select, runlocal, ...).
"""

import ml_collections

from capsim import config_lib as common
from vtfn_jax import config_lib as vtfn_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    arg = common.parse_arg(
        arg,
        **vtfn_common.OPTIONS,
        loss="pearson",  # over correct and shuffled caption-image pairs; any capsim.losses name
        dim=128,  # N: the GRU state, the sentence vector and W's output
        lr=1e-3,  # Adam
        decay=0.5,  # the learning rate's factor every decay_steps
        decay_steps=2000,
        l2=1e-6,  # Adam's coupled L2
        batch=128,
        epochs=20.0,  # with early stopping (patience 5) on the dev evaluation
        eval_every=100,  # dev same-image AUC, steps
    )
    # Data: COCO captions with image features (250 dev, 500 test images held out); same/diff, retrieval and STS reports.
    config = vtfn_common.run(arg)
    # Model: a GRU's final state (dropout 0.2 on the word vectors), affine image map W.
    config.model = vtfn_common.model(arg, encoder=dict(kind="gru", dropout=0.2))
    config.loss = vtfn_common.loss(arg)
    return vtfn_common.finish(config, arg)
