"""GloVe-average baseline, non-restricted (NR): every word of the GloVe file keeps its vector.

    python -m vtfn_jax.train --config=configs/baseline_glove_nr.py:data_dir=/data --workdir=...

See configs.vtfn_common.baseline_config.
"""

import ml_collections

from configs import vtfn_common


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    return vtfn_common.baseline_config(arg, kind="glove_avg", source="files", restricted=False)
