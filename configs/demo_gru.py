"""VTFN with the gru text encoder on the embedded shapes world (a few minutes on 2 CPU cores).

python -m vtfn_jax.train --config=configs/demo_gru.py --workdir=/tmp/vtfn_demo_gru
"""

import ml_collections

from configs import common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return common.vtfn_config(arg, encoder="gru", source="shapes_world", epochs=30.0)
