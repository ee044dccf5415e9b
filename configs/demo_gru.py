"""VTFN with the gru text encoder on the embedded shapes world (a few minutes on 2 CPU cores).

python -m vtfn_jax.train --config=configs/demo_gru.py --workdir=/tmp/vtfn_demo_gru
"""

import ml_collections

from configs import vtfn_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    # Data: the shapes world; same/diff, retrieval and its own pairs.
    config, arg = vtfn_common.run(arg, source="shapes_world", epochs=30.0)
    # Model: text tower = a GRU's final state (N = dim), affine image map W.
    config.model = vtfn_common.text_tower(arg, encoder="gru")
    # Loss: Pearson over correct and shuffled caption-image pairs (:loss=... for the others).
    config.loss = vtfn_common.loss(arg)
    return config
