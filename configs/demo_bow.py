"""VTFN with the bow_sum text encoder on the embedded shapes world (a few minutes on 2 CPU cores).

    python -m vtfn_jax.train --config=configs/demo_bow.py --workdir=/tmp/vtfn_demo_bow

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
        dim=128,  # N: word vectors, the sentence vector and W's output
        lr=1e-3,  # Adam
        decay=0.5,  # the learning rate's factor every decay_steps
        decay_steps=2000,
        l2=1e-6,  # Adam's coupled L2
        batch=128,
        epochs=30.0,  # with early stopping (patience 5) on the dev evaluation
        eval_every=100,  # dev same-image AUC, steps
    )
    # Data: the shapes world; same/diff, retrieval and its own pairs.
    config = vtfn_common.run(arg, sources="shapes_world")
    # Model: the normalised sum of word vectors (N-d words), affine image map W.
    config.model = vtfn_common.model(arg, encoder=dict(kind="bow_sum"))
    config.loss = vtfn_common.loss(arg)
    return vtfn_common.finish(config, arg)
