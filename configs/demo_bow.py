"""VTFN with the bow_sum text encoder on the embedded shapes world (a few minutes on 2 CPU cores).

python -m vtfn_jax.train --config=configs/demo_bow.py --workdir=/tmp/vtfn_demo_bow
"""

import ml_collections

from configs import common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return common.vtfn_config(arg, encoder="bow_sum", source="shapes_world", epochs=30.0)
